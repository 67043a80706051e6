"""What kubectl and Kubernetes' clients expect of the API beyond the objects themselves: the printed
columns of ``kubectl get`` (:mod:`.printing`), the descriptions ``kubectl explain`` shows
(:mod:`.descriptions`), and Kubernetes' own field names, which tell a misspelt field from one corral
keeps without acting on it (:mod:`.fields`, over the generated :mod:`.kubernetes_fields`)."""
