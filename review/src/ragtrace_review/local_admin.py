"""The serving process's local admin credential: how the first reviewer is created while
`ragtrace serve` owns an embedded store and the server has no tokens.

Such a server's store can be opened by no other process, and its `/api/reviewers` would otherwise be
closed (no tenant token, no RAGTRACE_ADMIN_TOKEN), so nobody could create the reviewer who logs in.
Instead the server writes a credential to `FILENAME` in the store directory, readable only by the
user it runs as (mode 0600), and `/api/reviewers` takes that credential:

* only from a loopback peer, and only when the request carries no proxy header (a reverse proxy on
  this machine relays remote callers from a loopback address);
* once: a use consumes it and the server writes the next one in its place, so a credential seen in a
  log or a shell history is already spent;
* until the server stops, which removes the file.

Reading the file is the proof: another user of the machine cannot, and a remote caller has no file.
`ragtrace reviewers ... --server URL` (and `--store DIR` of a served store) reads it with
`read_credential`, which refuses a file that is not the caller's own or that others could read.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import os
import secrets
import stat
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from ragtrace_review.errors import ReviewError

__all__ = ["FILENAME", "PROXY_HEADERS", "LocalAdmin", "LocalCredential", "is_loopback", "loopback_url",
           "read_credential"]

#: the credential's file, in the store directory
FILENAME = "serve-admin-credential.json"
#: a request with one of these came through a proxy, whatever its peer address
PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip")


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (a peer's address as the server saw it) is this machine's loopback."""
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 on a dual-stack socket
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def loopback_url(host: str, port: int) -> str:
    """The URL a process of this machine reaches a server listening on ``host``:``port`` at."""
    if host in ("", "0.0.0.0", "localhost") or is_loopback(host):
        return f"http://127.0.0.1:{port}"
    if host == "::":
        return f"http://[::1]:{port}"
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


@dataclass(frozen=True)
class LocalCredential:
    """What the file holds: the server's ``url`` (as reached from this machine), its ``pid`` and
    the current ``token``. ``path`` is the file it was read from."""

    url: str
    pid: int
    token: str = field(repr=False)
    path: Path

    def serves(self, url: str) -> bool:
        """Whether ``url`` (a --server given on the command line) is this server, reached over loopback."""
        given, ours = urlsplit(url), urlsplit(self.url)
        return _is_loopback_name(given.hostname) and given.port == ours.port and given.scheme == ours.scheme


def _is_loopback_name(host: str | None) -> bool:
    return host == "localhost" or is_loopback(host)


class LocalAdmin:
    """The credential of one serving process: writes it to ``directory / FILENAME`` (mode 0600) at
    construction, checks and renews it in `accept`, removes the file in `close`."""

    def __init__(self, directory: Path, url: str) -> None:
        self.path = Path(directory) / FILENAME
        self.url = url
        self._lock = threading.Lock()
        self._token = ""
        self._renew()

    def _renew(self) -> None:
        """A new token, written in place of the old one. The file is created 0600 and then renamed
        over the old: no moment exists at which another user could open it."""
        token = secrets.token_urlsafe(32)
        body = json.dumps({"url": self.url, "pid": os.getpid(), "token": token}).encode()
        tmp = self.path.with_name(f".{FILENAME}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        self._token = token

    def accept(self, sent: str, peer: str | None, headers: Mapping[str, str]) -> bool:
        """Whether ``sent`` is the current credential, from a loopback ``peer``, not through a proxy.
        A match spends it: the next one is written to the file before this returns."""
        with self._lock:
            if not self._token:
                return False
            matched = hmac.compare_digest(self._token.encode(), sent.encode())
            if not matched or not is_loopback(peer) or any(h in headers for h in PROXY_HEADERS):
                return False
            try:
                self._renew()
            except OSError:
                self._token = ""  # spent all the same; the file still holds it, and it no longer opens anything
            return True

    def close(self) -> None:
        """Remove the file if it is still this process's (a later server may have replaced it)."""
        with self._lock:
            self._token = ""
            try:
                if json.loads(self.path.read_bytes()).get("pid") == os.getpid():
                    self.path.unlink()
            except (OSError, ValueError, AttributeError):
                pass


def read_credential(directory: Path) -> LocalCredential | None:
    """The credential a server left in ``directory`` (None when there is none). Raises `ReviewError`
    for a file this user must not trust or cannot read: another user's, or one others may read."""
    path = Path(directory).expanduser() / FILENAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except PermissionError as exc:
        raise ReviewError(f"cannot read {path} ({exc.strerror}): only the user running `ragtrace serve` can use "
                          "its local admin credential; run this command as that user, or pass --token") from exc
    except OSError as exc:
        raise ReviewError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if info.st_uid != os.getuid():
            raise ReviewError(f"{path} belongs to uid {info.st_uid}, not to you (uid {os.getuid()}): only the user "
                              "running `ragtrace serve` may use its local admin credential; run this command as "
                              "that user, or pass --token")
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise ReviewError(f"{path} can be read by other users (mode {stat.S_IMODE(info.st_mode):o}), so it proves "
                              "nothing; restart `ragtrace serve`, which writes it with mode 600")
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            data = json.loads(fh.read(64 * 1024))
    except ValueError as exc:
        raise ReviewError(f"{path} is not a credential `ragtrace serve` wrote ({exc}); restart the server") from exc
    finally:
        if fd >= 0:
            os.close(fd)
    if not (isinstance(data, dict) and isinstance(data.get("url"), str) and isinstance(data.get("token"), str)
            and isinstance(data.get("pid"), int)):
        raise ReviewError(f"{path} is not a credential `ragtrace serve` wrote; restart the server")
    return LocalCredential(url=data["url"], pid=data["pid"], token=data["token"], path=path)
