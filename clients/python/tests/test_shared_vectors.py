"""The vectors under test/vectors, generated from the TypeScript SDK: the Python client must agree."""

import json
import unittest
from datetime import datetime

from tests.support import load_vectors

from recovery_ledger import canonical_json, input_hash, redact_text, retry_after_ms


class CanonicalInputHashTest(unittest.TestCase):
    def test_every_vector(self) -> None:
        vectors = load_vectors("canonical-input-hash.json")["vectors"]
        self.assertGreater(len(vectors), 40)
        for vector in vectors:
            with self.subTest(vector["name"]):
                value = json.loads(vector["input_json"])
                self.assertEqual(canonical_json(value), vector["canonical"])
                self.assertEqual(input_hash(value), vector["sha256"])

    def test_python_values_hash_as_a_javascript_runtime_would_see_them(self) -> None:
        # A tuple is an array; 1.0 is 1; an int beyond 2**53 is the double JavaScript parses it to.
        self.assertEqual(input_hash({"a": (1, 2.0)}), input_hash(json.loads('{"a":[1,2]}')))
        self.assertEqual(canonical_json(2**53 + 1), "9007199254740992")
        self.assertEqual(canonical_json(10**400), "null")
        self.assertEqual(canonical_json(float("nan")), "null")
        self.assertEqual(canonical_json(-0.0), "0")
        # A surrogate pair written as two code points is the one character JavaScript sees.
        self.assertEqual(canonical_json("\ud83d\ude00"), canonical_json("😀"))

    def test_refuses_what_json_cannot_say(self) -> None:
        for value in ({1: "a"}, {"a": {1, 2}}, {"at": datetime(2030, 1, 1)}, b"bytes"):
            with self.subTest(repr(value)), self.assertRaises(TypeError):
                canonical_json(value)


class RetryAfterVectorsTest(unittest.TestCase):
    def test_every_vector(self) -> None:
        file = load_vectors("retry-after.json")
        now = datetime.fromisoformat(file["now"].replace("Z", "+00:00"))
        for vector in file["vectors"]:
            with self.subTest(vector["value"]):
                self.assertEqual(retry_after_ms(vector["value"], now), vector["ms"])


class RedactionVectorsTest(unittest.TestCase):
    def test_every_vector(self) -> None:
        vectors = load_vectors("redaction.json")["vectors"]
        self.assertGreater(len(vectors), 30)
        for vector in vectors:
            with self.subTest(vector["text"][:60]):
                redacted, kinds = redact_text(vector["text"])
                self.assertEqual(redacted, vector["redacted"])
                self.assertEqual(kinds, vector["kinds"])


class NormalizerVectorsTest(unittest.TestCase):
    """The same answer gives the same envelope, byte for byte, in both SDKs."""

    def test_http_answers(self) -> None:
        from recovery_ledger import HttpResponse, NormalizeContext, normalize_http_response

        file = load_vectors("normalizers.json")
        now = datetime.fromisoformat(file["now"].replace("Z", "+00:00"))
        self.assertGreater(len(file["http"]), 60)
        for case in file["http"]:
            with self.subTest(case["name"], side_effect=case["side_effect"]):
                envelope = normalize_http_response(
                    HttpResponse(case["status"], headers=case.get("headers"), body=case.get("body")),
                    NormalizeContext(operation_ref="run_81/step_4", side_effect=case["side_effect"], now=now),
                    input_fields=case.get("input_fields"),
                    code_map=case.get("code_map"),
                )
                self.assertEqual(canonical_json(envelope), canonical_json(case["envelope"]))

    def test_mcp_results(self) -> None:
        from recovery_ledger import NormalizeContext, normalize_mcp_tool_result

        file = load_vectors("normalizers.json")
        now = datetime.fromisoformat(file["now"].replace("Z", "+00:00"))
        for case in file["mcp"]:
            with self.subTest(case["name"], side_effect=case["side_effect"]):
                envelope = normalize_mcp_tool_result(
                    case["result"],
                    NormalizeContext(operation_ref="run_81/step_4", side_effect=case["side_effect"], now=now),
                    allowed_codes=case["allowed_codes"],
                    input_fields=case.get("input_fields"),
                    trust_messages=case.get("trust_messages", False),
                )
                self.assertEqual(canonical_json(envelope), canonical_json(case["envelope"]))
