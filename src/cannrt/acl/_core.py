"""Process-level pyACL calls: acl.init / acl.finalize, version, SoC name, recent error message."""

from __future__ import annotations

import contextlib
import json
import os

from cannrt.acl._state import FINALIZERS, STATE, api, as_str, fail
from cannrt.api.dump import DumpSession, config_from_acl_json
from cannrt.errors import CannError, ErrorCode
from cannrt.runtime.core import get_runtime

ACL_ERROR_INVALID_FILE = 100003
ACL_ERROR_PARSE_FILE = 100006
VERSION = (1, 0, 0)  # the pyACL interface version this facade follows


def _read_config(path: str) -> dict[str, object]:
    """Parse an acl.json configuration (its "dump" section is acted on; others are accepted)."""
    if not os.path.isfile(path):
        raise fail(ACL_ERROR_INVALID_FILE, f"configuration file {path!r} does not exist")
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        data = json.loads(text) if text.strip() else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise fail(ACL_ERROR_PARSE_FILE, f"cannot parse {path!r}: {exc}") from None
    if not isinstance(data, dict):
        raise fail(ACL_ERROR_PARSE_FILE, f"{path!r} must hold a JSON object")
    return data


@api()
def init(config_path: str | None = None) -> None:
    """Initialise pyACL for this process (aclInit); repeated init -> ACL_ERROR_REPEAT_INITIALIZE."""
    path = "" if config_path is None else as_str("config_path", config_path)
    with STATE.lock:
        if STATE.initialized:
            raise fail(ErrorCode.REPEAT_INITIALIZE, "acl.init was already called")
        config = _read_config(path) if path else {}
        STATE.runtime = get_runtime()
        STATE.clear()
        section = config.get("dump")
        if isinstance(section, dict):
            STATE.dump = DumpSession(STATE.runtime, config_from_acl_json(section))
        STATE.initialized = True
        STATE.finalized = False


@api()
def finalize() -> None:
    """Release every device and host resource (aclFinalize)."""
    with STATE.lock:
        if not STATE.initialized:
            code = ErrorCode.REPEAT_FINALIZE if STATE.finalized else ErrorCode.UNINITIALIZE
            raise fail(code, "acl.finalize without a matching acl.init")
        runtime = STATE.runtime
        if STATE.dump is not None:
            if runtime is not None:
                for device_id in list(runtime.devices):
                    with contextlib.suppress(CannError):  # finalize after a fault still writes files
                        runtime.synchronize_device(device_id)
            STATE.dump.stop()
            STATE.dump = None
        STATE.initialized = False
        STATE.finalized = True
        STATE.runtime = None
        STATE.clear()
        for forget in FINALIZERS:
            forget()
        if runtime is not None:
            runtime.exception_callback = None
            runtime.close()


@api(0, 0, 0)
def get_version() -> tuple[int, int, int]:
    """(major, minor, patch, ret) of the interface (aclrtGetVersion)."""
    return VERSION


def get_soc_name() -> str | None:
    """Name of the simulated chip, e.g. 'Ascend910B1' (aclrtGetSocName); None before init."""
    if not STATE.initialized or STATE.runtime is None:
        return None
    return STATE.runtime.settings.chip.name


def get_recent_err_msg() -> str:
    """The message of this thread's most recent failed call, then cleared (aclGetRecentErrMsg)."""
    message, STATE.errors.message = STATE.errors.message, ""
    return message
