"""Before send or after: the exceptions the standard library really raises, produced on loopback
sockets (refused, reset, timed out, cut short), through ``call_http_tool`` and the classifier."""

import errno
import http.client
import socket
import ssl
import time
import urllib.error
import urllib.request

from tests.loopback import RawServer, closed_port, read_request, reset
from tests.support import EnvelopeAssertions, context

from recovery_ledger import call_http_tool, classify_network_error, normalize_network_error


def raised(call):
    try:
        call()
    except BaseException as error:  # noqa: BLE001
        return error
    raise AssertionError("nothing was raised")


class ClassifierTest(EnvelopeAssertions):
    def test_real_errors_are_placed_by_their_types(self) -> None:
        refused_port = closed_port()
        refused = raised(lambda: socket.create_connection(("127.0.0.1", refused_port), timeout=2))
        self.assertEqual(classify_network_error(refused).phase, "before_send")
        # urllib wraps what fails while connecting or sending in URLError(reason=...).
        wrapped = raised(lambda: urllib.request.urlopen(f"http://127.0.0.1:{refused_port}/", timeout=2))
        self.assertIsInstance(wrapped, urllib.error.URLError)
        self.assertEqual((classify_network_error(wrapped).phase, classify_network_error(wrapped).kind), ("before_send", "connect"))

        hang_up = RawServer(lambda connection: (read_request(connection), connection.close()))
        self.addCleanup(hang_up.close)
        disconnected = raised(lambda: urllib.request.urlopen(hang_up.url, timeout=2))
        self.assertIsInstance(disconnected, http.client.RemoteDisconnected)
        self.assertEqual(classify_network_error(disconnected).phase, "after_send")

        silent = RawServer(lambda connection: (read_request(connection), time.sleep(1.0)))
        self.addCleanup(silent.close)
        timed_out = raised(lambda: urllib.request.urlopen(silent.url, timeout=0.2))
        self.assertEqual((classify_network_error(timed_out).phase, classify_network_error(timed_out).kind), ("unknown", "timeout"))

    def test_the_mapping_table(self) -> None:
        gai = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        cases = [
            (gai, "before_send", "dns"),
            (urllib.error.URLError(gai), "before_send", "dns"),
            (ConnectionRefusedError(errno.ECONNREFUSED, "refused"), "before_send", "connect"),
            (OSError(errno.EHOSTUNREACH, "no route"), "before_send", "connect"),
            (ssl.SSLCertVerificationError("certificate verify failed"), "before_send", "tls_certificate"),
            (http.client.InvalidURL("bad"), "before_send", "other"),
            (ConnectionResetError(errno.ECONNRESET, "reset"), "after_send", "reset"),
            (BrokenPipeError(errno.EPIPE, "pipe"), "after_send", "reset"),
            (http.client.RemoteDisconnected("closed"), "after_send", "reset"),
            (http.client.IncompleteRead(b"partial", 10), "after_send", "protocol"),
            (http.client.BadStatusLine("garbage"), "after_send", "protocol"),
            (TimeoutError("timed out"), "unknown", "timeout"),
            (OSError(errno.ETIMEDOUT, "timed out"), "unknown", "timeout"),
            (ssl.SSLError("eof"), "unknown", "tls"),
            (http.client.CannotSendRequest(), "unknown", "other"),
            (ValueError("not a network error"), "unknown", "other"),
        ]
        for error, phase, kind in cases:
            with self.subTest(error=repr(error)):
                classified = classify_network_error(error)
                self.assertEqual((classified.phase, classified.kind), (phase, kind))

    def test_before_send_is_claimed_only_when_every_signal_says_so(self) -> None:
        chained = RuntimeError("adapter failed")
        chained.__cause__ = ConnectionRefusedError(errno.ECONNREFUSED, "refused")
        self.assertEqual(classify_network_error(chained).phase, "before_send")
        mixed = RuntimeError("adapter failed")
        mixed.__cause__ = ConnectionResetError(errno.ECONNRESET, "reset")
        mixed.__cause__.__cause__ = ConnectionRefusedError(errno.ECONNREFUSED, "refused")
        self.assertEqual(classify_network_error(mixed).phase, "after_send")
        # An error raised while handling another (no `from`) does not inherit its "before send".
        try:
            try:
                raise ConnectionRefusedError(errno.ECONNREFUSED, "refused")
            except OSError:
                raise ValueError("the retry inside the adapter sent, then failed to parse")  # noqa: B904 - implicit on purpose
        except ValueError as implicit:
            self.assertEqual(classify_network_error(implicit).phase, "unknown")

    def test_envelopes_by_phase(self) -> None:
        refused = ConnectionRefusedError(errno.ECONNREFUSED, "refused")
        self.assert_shape(normalize_network_error(refused, context()), code="NETWORK_UNREACHABLE", commit_state="not_committed", next_action="wait_and_retry")
        self.assert_shape(normalize_network_error(ssl.SSLCertVerificationError("x"), context()), code="TLS_FAILURE", next_action="escalate")
        reset_error = ConnectionResetError(errno.ECONNRESET, "reset")
        self.assert_shape(normalize_network_error(reset_error, context()), code="OUTCOME_UNKNOWN", commit_state="unknown", next_action="verify_operation")
        self.assert_shape(normalize_network_error(reset_error, context("read")), code="REQUEST_INTERRUPTED", next_action="wait_and_retry")
        # A hint decides only what the error cannot tell, and never overrules "after send".
        self.assert_shape(normalize_network_error(TimeoutError(), context(), phase="before_send"), commit_state="not_committed")
        self.assert_shape(normalize_network_error(TimeoutError(), context()), commit_state="unknown")
        self.assert_shape(normalize_network_error(reset_error, context(), phase="before_send"), commit_state="unknown")
        for envelope in (normalize_network_error(refused, context()), normalize_network_error(reset_error, context())):
            self.assert_valid(envelope)


class CallHttpToolPhasesTest(EnvelopeAssertions):
    """call_http_tool connects first, so a failure is placed by where it happened."""

    def call(self, url: str, side_effect: str = "write", timeout: float = 2.0):
        return call_http_tool(url + "/invoices", body={"customer_id": "cus_1"}, operation_ref="run_81/step_4",
                              side_effect=side_effect, timeout=timeout)

    def test_refused_connect_is_before_send(self) -> None:
        envelope = self.call(f"http://127.0.0.1:{closed_port()}")
        self.assert_shape(envelope, code="NETWORK_UNREACHABLE", commit_state="not_committed", next_action="wait_and_retry")
        self.assert_valid(envelope)

    def test_a_reset_after_the_request_is_unknown_for_a_write(self) -> None:
        server = RawServer(lambda connection: (read_request(connection), reset(connection)))
        self.addCleanup(server.close)
        envelope = self.call(server.url)
        self.assert_shape(envelope, code="OUTCOME_UNKNOWN", commit_state="unknown", next_action="verify_operation")
        self.assert_shape(self.call(server.url, "read"), code="REQUEST_INTERRUPTED", commit_state="not_committed")

    def test_no_answer_in_time_is_unknown_for_a_write(self) -> None:
        server = RawServer(lambda connection: (read_request(connection), time.sleep(1.0)))
        self.addCleanup(server.close)
        self.assert_shape(self.call(server.url, timeout=0.2), code="OUTCOME_UNKNOWN", commit_state="unknown")

    def test_an_answer_cut_short_is_unknown_for_a_write(self) -> None:
        def cut(connection):
            read_request(connection)
            connection.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\":")
            connection.close()

        server = RawServer(cut)
        self.addCleanup(server.close)
        self.assert_shape(self.call(server.url), code="OUTCOME_UNKNOWN", commit_state="unknown")

    def test_the_idempotency_key_is_the_operation_ref(self) -> None:
        seen = []

        def answer(connection):
            seen.append(read_request(connection))
            connection.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"id\":\"inv1\"}")
            connection.close()

        server = RawServer(answer)
        self.addCleanup(server.close)
        envelope = self.call(server.url)
        self.assertEqual(envelope["verification"]["evidence_ref"], "inv1")
        self.assertIn(b"Idempotency-Key: run_81/step_4", seen[0])
