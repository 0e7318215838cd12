"""What the shared vectors cannot carry: Python values JSON never produces, the order JavaScript
walks an object's keys in, and the detector hook. The text rules themselves are pinned by
test/vectors/redaction.json (test_shared_vectors)."""

import unittest

from recovery_ledger.redaction import DetectedSecret, Redaction, contains_secret, is_secret_key_name, redact_deep, redact_text


class RedactDeepTest(unittest.TestCase):
    def test_a_card_is_a_card_as_an_int_or_an_integral_float_but_not_beyond_javascripts_safe_integers(self) -> None:
        value, redactions = redact_deep({"a": 4111111111111111, "b": 6011111111111117.0, "c": 4111111111111111.5, "d": -4111111111111111})
        self.assertEqual(value, {"a": "[REDACTED:card_number]", "b": "[REDACTED:card_number]", "c": 4111111111111111.5, "d": -4111111111111111})
        self.assertEqual(redactions, [Redaction("a", "card_number"), Redaction("b", "card_number")])
        # 2**53 + 1 is no safe integer: JavaScript would not even hold its digits.
        self.assertEqual(redact_deep(9007199254740993), (9007199254740993, []))

    def test_a_bool_is_not_a_number_and_stays_under_a_secret_name(self) -> None:
        value, redactions = redact_deep({"password": True, "token": None, "api_key": "", "pwd": 0, "auth": (1, 2)})
        self.assertEqual(value, {"password": True, "token": None, "api_key": "", "pwd": "[REDACTED:named_secret]", "auth": "[REDACTED:named_secret]"})
        self.assertEqual([item.path for item in redactions], ["pwd", "auth"])

    def test_keys_are_walked_in_javascripts_order_array_indices_first(self) -> None:
        _, redactions = redact_deep({"b": "secret=abcdef", "10": "secret=abcdef", "2": "secret=abcdef"}, "$r")
        self.assertEqual([item.path for item in redactions], ["$r.2", "$r.10", "$r.b"])

    def test_a_secret_in_a_key_is_redacted_and_reported_at_the_key(self) -> None:
        value, redactions = redact_deep({"AKIAIOSFODNN7EXAMPLE": "x"}, "result")
        self.assertEqual(value, {"[REDACTED:aws_access_key]": "x"})
        self.assertEqual(redactions, [Redaction("result.<key>", "aws_access_key")])


class DetectorTest(unittest.TestCase):
    def test_the_detector_ranges_are_merged_and_replaced_before_the_shapes(self) -> None:
        def detect(text: str) -> list[DetectedSecret]:
            start = text.index("hook")
            return [DetectedSecret(start, start + 6, "detected_x"), DetectedSecret(start + 2, start + 10, "detected_y"), DetectedSecret(0, 0, "detected_z")]

        text, kinds = redact_text("see hook-1234-abcd and AKIAIOSFODNN7EXAMPLE", detect=detect)
        self.assertEqual(text, "see [REDACTED:detected_x]abcd and [REDACTED:aws_access_key]")
        self.assertEqual(kinds, ["detected_x", "aws_access_key"])
        self.assertTrue(contains_secret("plain words", detect=lambda text: [DetectedSecret(0, 5, "detected_w")]))
        self.assertFalse(contains_secret("plain words"))


class KeyNameTest(unittest.TestCase):
    def test_names_are_compared_lower_case_without_separators(self) -> None:
        for name in ("DB_PASSWORD", "client-secret", "x-api-key", "Authorization", "refresh_token", "api\u212aey", "sessionId", "card_cvc"):
            with self.subTest(name):
                self.assertTrue(is_secret_key_name(name))
        for name in ("token_type", "author", "id", "tokens", "pass"):
            with self.subTest(name):
                self.assertFalse(is_secret_key_name(name))
