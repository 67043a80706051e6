"""Generated requests from the server's own OpenAPI documents (the schemathesis command), as the
admin, against a real server: no answer may be a 5xx, carry a status code the document does not
list, or, for a success, break the shape the document promises. Bounded: a fixed seed, the
fuzzing and examples phases, a few examples per operation, so the run takes about a minute and
fails the same way every time. Seed and size: FUZZ_SEED and FUZZ_EXAMPLES."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import requests

SCHEMATHESIS = shutil.which("schemathesis", path=os.path.dirname(sys.executable)) or "schemathesis"


def merged_openapi(url: str, session: requests.Session) -> dict:
    """Every group-version's document, as one (they share their components), without the
    ``watch`` parameter: a watch answers a stream of events, one JSON document per line, which no
    response schema describes (tests/server/test_watch.py covers watches)."""
    index = session.get(url + "/openapi/v3", timeout=10).json()
    merged: dict = {}
    for entry in index["paths"].values():
        doc = session.get(url + entry["serverRelativeURL"], timeout=10).json()
        if merged:
            merged["paths"].update(doc["paths"])
        else:
            merged = doc
    for operations in merged["paths"].values():
        for operation in operations.values():
            operation["parameters"] = [p for p in operation.get("parameters", []) if p["name"] != "watch"]
    return merged


@pytest.mark.timeout(400)
def test_generated_requests_get_no_5xx_and_answers_as_the_openapi_documents_promise(server_process, tmp_path):
    creds = server_process.credentials()
    with requests.Session() as session:
        session.headers.update(creds.headers())
        session.verify = server_process.ca_file
        session.trust_env = False  # else requests prefers $REQUESTS_CA_BUNDLE to the session's own CA
        doc = merged_openapi(server_process.url, session)
    path = tmp_path / "openapi.json"
    path.write_text(json.dumps(doc))
    proc = subprocess.run(
        [SCHEMATHESIS, "run", str(path), "--url", server_process.url, "--tls-verify", server_process.ca_file,
         "-H", f"Authorization: {creds.headers()['Authorization']}",
         "--phases", "examples,fuzzing", "--max-examples", os.environ.get("FUZZ_EXAMPLES", "20"),
         "--seed", os.environ.get("FUZZ_SEED", "1"), "--generation-deterministic", "--workers", "2",
         "--request-timeout", "10", "--checks", "all", "--continue-on-failure", "--no-color",
         # Valid by the schema yet refused (a name that is not a DNS label, a quantity that does
         # not parse, a pod with no containers): rules a JSON schema does not express, answered
         # 422 with the field, as Kubernetes' own OpenAPI leaves them out too.
         "--exclude-checks", "positive_data_acceptance",
         # It learns names from lists, its own token's among them: deleting that would leave every
         # later request 401 (tests/server/test_authn.py covers revocation).
         "--exclude-operation-id", "deleteToken"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")})
    assert proc.returncode == 0, proc.stdout[-20000:] + proc.stderr[-5000:]
