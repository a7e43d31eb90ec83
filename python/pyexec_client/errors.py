"""Exceptions raised by the pyexec client.

Every error the server reports carries its message (the ``{"error": ...}``
body) and HTTP status; each common status has its own class so that callers
can catch exactly what they handle.
"""

from __future__ import annotations

from typing import Dict, Optional, Type


class PyExecError(Exception):
    """Base class of every exception this package raises."""


class TransportError(PyExecError):
    """The server could not be reached or the connection failed."""


class StreamEndedError(PyExecError):
    """An event stream ended before the execution's final status."""


class WaitTimeoutError(PyExecError, TimeoutError):
    """Waiting for an execution took longer than the caller allowed."""


class APIError(PyExecError):
    """The server answered with an HTTP error.

    Attributes:
        status_code: the HTTP status, e.g. 404.
        message: the server's explanation (the ``error`` field of the body).
        retry_after: seconds the server asked to wait before retrying
            (429 and 503 answers), or None.
    """

    def __init__(self, status_code: int, message: str, retry_after: Optional[float] = None) -> None:
        super().__init__(f"{message} (HTTP {status_code})")
        self.status_code = status_code
        self.message = message
        self.retry_after = retry_after


class BadRequestError(APIError):
    """400: the request was malformed or asked for something not allowed."""


class AuthenticationError(APIError):
    """401: the API key is missing or wrong."""


class NotFoundError(APIError):
    """404: no such execution (or endpoint)."""


class PayloadTooLargeError(APIError):
    """413: the code, files or upload exceed the server's limits."""


class RateLimitError(APIError):
    """429: the server is at capacity; retry after ``retry_after`` seconds."""


class ServerError(APIError):
    """5xx: the server failed."""


class ServiceUnavailableError(ServerError):
    """503: the server is shutting down or not ready."""


_BY_STATUS: Dict[int, Type[APIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    404: NotFoundError,
    413: PayloadTooLargeError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def error_for_status(status_code: int, message: str, retry_after: Optional[float] = None) -> APIError:
    """Return the APIError subclass instance that fits status_code."""
    cls = _BY_STATUS.get(status_code)
    if cls is None:
        cls = ServerError if status_code >= 500 else APIError
    return cls(status_code, message, retry_after)
