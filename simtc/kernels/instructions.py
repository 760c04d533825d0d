"""Instruction records: frozen values whose fields are the PTX operands.

A kernel is a sequence of these records; executing one applies it to a
:class:`~simtc.tmem.TensorMemory` and :class:`~simtc.smem.SharedMemory`. The same records feed
the hardware executors (their descriptors and columns become the kernel's parameters), so the
simulator and the GPU run one description.
"""

from __future__ import annotations

from attrs import frozen

from simtc.mma.idesc import InstrDescriptor
from simtc.smem.desc import SmemDescriptor

__all__ = ["Tcgen05Cp", "Tcgen05Mma"]


@frozen
class Tcgen05Cp:
    """``tcgen05.cp.cta_group::1.{shape}[.multicast] [taddr], s-desc``."""

    taddr: int
    desc: SmemDescriptor
    shape: str = "128x256b"
    multicast: str | None = None
    label: str = ""

    def ptx(self) -> str:
        mc = f".{self.multicast}" if self.multicast else ""
        return f"tcgen05.cp.cta_group::1.{self.shape}{mc} [{self.taddr:#x}], {self.desc.hex()}"

    def execute(self, tm, smem) -> None:
        tm.cp(self.taddr, smem, self.desc, self.shape, self.multicast, label=self.label or self.ptx())


@frozen
class Tcgen05Mma:
    """``tcgen05.mma[.ws].cta_group::1.kind::f16 [d], a, b-desc, idesc, enable-input-d``.

    ``a`` is a TMEM address (int, TS form) or a shared-memory descriptor (SS form).
    """

    d_taddr: int
    a: int | SmemDescriptor
    b_desc: SmemDescriptor
    idesc: InstrDescriptor
    enable_input_d: bool
    ws: bool = False
    label: str = ""

    @property
    def form(self) -> str:
        return "SS" if isinstance(self.a, SmemDescriptor) else "TS"

    def ptx(self) -> str:
        a = self.a.hex() if isinstance(self.a, SmemDescriptor) else f"[{self.a:#x}]"
        return (f"tcgen05.mma{'.ws' if self.ws else ''}.cta_group::1.kind::f16 [{self.d_taddr:#x}], {a}, "
                f"{self.b_desc.hex()}, {self.idesc.hex()}, {int(self.enable_input_d)}")

    def execute(self, tm, smem):
        from simtc.mma.tcgen05 import tcgen05_mma

        a = {"a_desc": self.a} if self.form == "SS" else {"a_taddr": self.a}
        return tcgen05_mma(tm, smem, d_taddr=self.d_taddr, b_desc=self.b_desc, idesc=self.idesc,
                           enable_input_d=self.enable_input_d, ws=self.ws, label=self.label or self.ptx(), **a)
