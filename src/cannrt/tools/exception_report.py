"""The AI Core error report in CANN's log wording (REFERENCE.md section 7); tools parse it."""

from __future__ import annotations

from cannrt.abi import ExceptionRecord


def _bits_word(bits: tuple[str, ...], names: tuple[str, ...]) -> int:
    return sum(1 << i for i, name in enumerate(names) if name in bits)


MTE_BITS = ("MTE_READ_OVERFLOW", "MTE_WRITE_OVERFLOW", "MTE_ERR_ADDR_MISALIGN", "MTE_ILLEGAL_STRIDE")
AIC_BITS = ("AIC_TASK_TIMEOUT",)
CCU_BITS = ("CCU_DIV0", "CCU_ILLEGAL_INSTR")
VEC_BITS = ("VEC_DIV0", "VEC_INF_NAN", "VEC_NEG_SQRT")
BIU_BITS = ("BIU_L2_READ_OOB", "BIU_L2_WRITE_OOB")


def format_exception_record(record: ExceptionRecord, allocation: list[str] | None = None) -> str:
    """The error line, the access and its source line, the user allocation it concerns (lines
    the runtime adds), the register dump, the error-code table and the failing SQE's 16 words."""
    mte = _bits_word(record.error_bits, MTE_BITS)
    ccu = _bits_word(record.error_bits, CCU_BITS)
    vec = _bits_word(record.error_bits, VEC_BITS)
    biu = _bits_word(record.error_bits, BIU_BITS)
    aic = _bits_word(record.error_bits, AIC_BITS)
    mask = (mte and 0x1) | (ccu and 0x2) | (vec and 0x4) | (biu and 0x8) | (aic and 0x10)
    lines = [
        f"The error from device({record.device_id}), serial number is {record.serial}, there is an error of "
        f"aicore, core id is {record.core_id}, error code = 0x{mask:x}, dump info: pc start: 0x{record.pc_start:x}, "
        f"current: 0x{record.pc_current:x}, vec error info: 0x{vec:x}, mte error info: 0x{mte:x}, "
        f"ifu error info: 0x0, ccu error info: 0x{ccu:x}, cube error info: 0x0, biu error info: 0x{biu:x}, "
        f"aic error mask: 0x{mask:x}, para base: 0x{record.para_base:x}, errorStr: {record.message}",
        f"kernel {record.kernel_name or '?'} on stream {record.stream_id}, task {record.task_id}, "
        f"block {record.block_index} of {record.block_dim} on core {record.core_id}, "
        f"error bits: {', '.join(record.error_bits)}, runtime code {record.error_code}",
        *_access_lines(record),
        *(allocation or []),
        "register dump: " + ", ".join(f"{name}=0x{value:x}" for name, value in record.registers.items()),
        f"core {record.core_id}: error code 0x{mask:x}",
    ]
    lines.extend(f"sqe[{i}]=0x{word:08x}" for i, word in enumerate(record.sqe_words))
    return "\n".join(lines)


def _access_lines(record: ExceptionRecord) -> list[str]:
    """The access (kind, size, address, tensor argument) and the kernel source line of the PC."""
    lines = []
    if record.access_kind:
        lines.append(
            f"{record.access_kind.upper()} of size {record.access_size} at 0x{record.access_address:x} "
            f"by argument {record.arg_index} '{record.arg_name}' ({record.tensor}), "
            f"first refused byte 0x{record.fault_address:x}"
        )
    if record.source:
        lines.append(f"  at pc 0x{record.pc_current:x}: {record.source}")
    return lines
