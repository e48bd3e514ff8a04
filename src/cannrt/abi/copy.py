"""Copy kinds (aclrtMemcpyKind): in the SDMA SQE, the driver's copy call and the pyACL facade."""

from __future__ import annotations

from enum import IntEnum


class CopyKind(IntEnum):
    """Which sides of a copy are host memory; DEFAULT lets the runtime decide from the addresses."""

    HOST_TO_HOST = 0
    HOST_TO_DEVICE = 1
    DEVICE_TO_HOST = 2
    DEVICE_TO_DEVICE = 3
    DEFAULT = 4

    @property
    def reads_host(self) -> bool:
        """The source is host memory."""
        return self in (CopyKind.HOST_TO_HOST, CopyKind.HOST_TO_DEVICE)

    @property
    def writes_host(self) -> bool:
        """The destination is host memory."""
        return self in (CopyKind.HOST_TO_HOST, CopyKind.DEVICE_TO_HOST)

    @property
    def crosses_pcie(self) -> bool:
        """One side is the host, the other a device."""
        return self in (CopyKind.HOST_TO_DEVICE, CopyKind.DEVICE_TO_HOST)
