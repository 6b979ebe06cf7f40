//! The instruction table: one row per encodable instruction form.
//!
//! Encoding, decoding, disassembly, bundle checks, the executor's legality
//! rules and the reference table in `book/src/isa.md` are all derived from
//! [`TABLE`], so they cannot drift apart.
//!
//! Word layout: bits 31..25 hold the major opcode. Register-only families
//! share a major and select the instruction with a function code in bits
//! 7..0. Operand fields:
//!
//! | field | bits | used for |
//! |---|---|---|
//! | D | 24..21 | destination register / first register |
//! | A | 20..17 | second register |
//! | B | 16..13 | third register |
//! | C | 12..9 | fourth register |
//! | S | 16 | post-increment flag of load/store immediate forms |
//! | I16 | 15..0 | 16-bit immediate |
//! | I21 | 20..0 | 21-bit address |

/// Every instruction form. Fieldless so the executor's dispatch is one
/// `match` on a byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    // System group.
    Nop,
    Exitz,
    Halt,
    Run,
    Runall,
    Get,
    Put,
    BrReg,
    Ampclr,
    Ldcwei,
    Ld128cwei,
    // Integer register forms.
    AddR,
    SubR,
    AndR,
    OrR,
    XorR,
    ShlR,
    ShrR,
    SarR,
    MulR,
    MinR,
    MaxR,
    CmpeqR,
    CmpultR,
    CmpsltR,
    MovMM,
    MovAM,
    MovMA,
    // Integer immediate forms.
    AddI,
    SubI,
    MulI,
    AndI,
    OrI,
    XorI,
    ShlI,
    ShrI,
    SarI,
    MinI,
    MaxI,
    CmpeqI,
    CmpultI,
    CmpsltI,
    SetziM,
    SetziA,
    SethiM,
    SethiA,
    // Control.
    Br,
    Brz,
    Brnz,
    Brnzdec,
    Call,
    RptI,
    RptR,
    Sync,
    // Floating point (aux pipeline).
    MovAA,
    F32Add,
    F32Sub,
    F32Mul,
    F32Max,
    F32Min,
    F32v2Add,
    F32v2Sub,
    F32v2Mul,
    F32v2Max,
    F32v2Min,
    F16v2Add,
    F16v2Sub,
    F16v2Mul,
    F16v2Max,
    F16v2Min,
    F16v4Add,
    F16v4Sub,
    F16v4Mul,
    F16v4Max,
    F16v4Min,
    F32Exp,
    F32Rcp,
    F32Rsqrt,
    F32Sqrt,
    F32Erf,
    F16ToF32,
    F32ToF16,
    F16v2ToF32,
    F32v2ToF16,
    F16v2Pack,
    F32FromI32,
    F32ToI32,
    F32v2Hadd,
    F32v2Hmax,
    F16v4Sum,
    F16v4Hmax,
    F16v4ToF8,
    F8v4ToF16,
    F16v4Amp,
    F8v8Amp,
    F16v4Acc,
    F32v4Acc,
    F32v4SqAcc,
    F32v2Gina,
    F32Div,
    F16v4SisoAmp,
    F16v2Exp,
    Fnop,
    F16v2Erf,
    // Register-offset loads and stores.
    Ldz8R,
    Lds8R,
    Ldz16R,
    Lds16R,
    Ldb16R,
    Ld32MR,
    Ld32AR,
    Ld64R,
    Ld128R,
    St8R,
    St16R,
    St32MR,
    St32AR,
    St64R,
    St128R,
    Ld2xSt64Pace,
    Ld64StepR,
    St64StepR,
    // Immediate-offset loads and stores.
    Ldz8,
    Lds8,
    Ldz16,
    Lds16,
    Ldb16,
    Ld32M,
    Ld32A,
    Ld64,
    Ld128,
    St8,
    St16,
    St32M,
    St32A,
    St64,
    St128,
    // Post-incrementing loads and stores.
    Ldz8Step,
    Lds8Step,
    Ldz16Step,
    Lds16Step,
    Ldb16Step,
    Ld32MStep,
    Ld32AStep,
    Ld64Step,
    Ld128Step,
    St8Step,
    St16Step,
    St32MStep,
    St32AStep,
    St64Step,
    St128Step,
}

/// What an operand is, which decides how it is written and checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `$m0`..`$m15` (`$mzero` = `$m15`).
    M,
    /// `$mN+=`: a base register that is post-incremented.
    MInc,
    /// `$mN:N+2+=`: three consecutive address registers, each
    /// post-incremented (the pace instruction).
    MTriple,
    /// `$a0`..`$a15` (`$azero` = `$a15`).
    A,
    /// `$aN:N+1`, N even.
    APair,
    /// `$aN:N+3`, N a multiple of 4.
    AQuad,
    /// A control/status register by name.
    CReg,
    /// Signed 16-bit immediate.
    SImm16,
    /// Unsigned 16-bit immediate.
    UImm16,
    /// Shift amount 0..=31.
    Shift,
    /// A 21-bit tile address (constant or symbol).
    Addr21,
    /// Repeat count 0..=0xFFFF.
    Count16,
    /// Repeat body length in words, 1..=255.
    Len8,
    /// Which pair of vector accumulators, 0 (accumulators 0 and 1) or 1
    /// (2 and 3).
    AccPair,
}

impl Kind {
    /// Immediates land in [`super::Inst::imm`]; everything else in the next
    /// register slot.
    pub(super) const fn is_immediate(self) -> bool {
        matches!(
            self,
            Kind::SImm16
                | Kind::UImm16
                | Kind::Shift
                | Kind::Addr21
                | Kind::Count16
                | Kind::AccPair
        )
    }

    #[cfg(test)]
    /// How the operand is described in the book table.
    pub(super) const fn syntax(self) -> &'static str {
        match self {
            Kind::M => "$m",
            Kind::MInc => "$m+=",
            Kind::MTriple => "$m:+2+=",
            Kind::A => "$a",
            Kind::APair => "$a:pair",
            Kind::AQuad => "$a:quad",
            Kind::CReg => "$creg",
            Kind::SImm16 => "simm16",
            Kind::UImm16 => "uimm16",
            Kind::Shift => "shift5",
            Kind::Addr21 => "addr21",
            Kind::Count16 => "count16",
            Kind::Len8 => "len8",
            Kind::AccPair => "accpair",
        }
    }
}

/// A bit field of the word: `width` bits starting at `shift`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub shift: u8,
    pub width: u8,
}

impl Field {
    pub(super) const fn mask(self) -> u32 {
        (((1u64 << self.width) - 1) as u32) << self.shift
    }

    pub(super) const fn get(self, word: u32) -> u32 {
        (word & self.mask()) >> self.shift
    }
}

pub(super) const FD: Field = Field {
    shift: 21,
    width: 4,
};
pub(super) const FA: Field = Field {
    shift: 17,
    width: 4,
};
pub(super) const FB: Field = Field {
    shift: 13,
    width: 4,
};
pub(super) const FC: Field = Field { shift: 9, width: 4 };
pub(super) const FI16: Field = Field {
    shift: 0,
    width: 16,
};
pub(super) const FI21: Field = Field {
    shift: 0,
    width: 21,
};
pub(super) const FCOUNT: Field = Field {
    shift: 8,
    width: 16,
};
pub(super) const FLEN: Field = Field { shift: 0, width: 8 };
pub(super) const FFUNC: Field = Field { shift: 0, width: 8 };
pub(super) const MAJOR: Field = Field {
    shift: 25,
    width: 7,
};
/// The post-increment flag of immediate-offset loads and stores.
pub(super) const STEP_BIT: u32 = 1 << 16;

/// Which pipeline an instruction issues in; a bundle pairs one of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pipe {
    /// Integer, memory and control.
    Main,
    /// Floating point and AMP.
    Aux,
}

/// Which contexts may execute an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contexts {
    Both,
    Worker,
    Supervisor,
}

/// One row of the table.
#[derive(Clone, Copy, Debug)]
pub struct OpInfo {
    pub op: Op,
    pub mnemonic: &'static str,
    /// The fixed bits (major opcode, function code, step flag).
    pub pattern: u32,
    /// Which bits `pattern` fixes.
    pub fixed_mask: u32,
    pub operands: &'static [(Kind, Field)],
    pub pipe: Pipe,
    pub contexts: Contexts,
    /// Changes the program counter other than by falling through; such
    /// instructions cannot share a bundle and are illegal in `rpt` bodies.
    pub control: bool,
    /// Issue slots the instruction occupies (each slot is six tile cycles).
    pub issues: u8,
    /// One sentence of semantics for the book.
    pub summary: &'static str,
}

impl OpInfo {
    /// Every bit an operand or the fixed pattern may set; any other set bit
    /// makes the word invalid.
    pub(super) fn used_mask(&self) -> u32 {
        self.operands
            .iter()
            .fold(self.fixed_mask, |m, (_, f)| m | f.mask())
    }
}

const G_SYS: u32 = 0x00;
const G_ALU: u32 = 0x01;
const G_FPU: u32 = 0x02;
const G_MEM: u32 = 0x03;

use Contexts::{Both, Supervisor as Sup, Worker};
use Kind::*;
use Pipe::{Aux, Main};

// The constructors mirror the table's columns, so they take many arguments.
#[allow(clippy::too_many_arguments)]
const fn grouped(
    op: Op,
    mnemonic: &'static str,
    group: u32,
    func: u32,
    operands: &'static [(Kind, Field)],
    pipe: Pipe,
    contexts: Contexts,
    summary: &'static str,
) -> OpInfo {
    OpInfo {
        op,
        mnemonic,
        pattern: (group << 25) | func,
        fixed_mask: MAJOR.mask() | FFUNC.mask(),
        operands,
        pipe,
        contexts,
        control: false,
        issues: 1,
        summary,
    }
}

const fn major(
    op: Op,
    mnemonic: &'static str,
    major: u32,
    operands: &'static [(Kind, Field)],
    pipe: Pipe,
    contexts: Contexts,
    summary: &'static str,
) -> OpInfo {
    OpInfo {
        op,
        mnemonic,
        pattern: major << 25,
        fixed_mask: MAJOR.mask(),
        operands,
        pipe,
        contexts,
        control: false,
        issues: 1,
        summary,
    }
}

const fn control(mut info: OpInfo) -> OpInfo {
    info.control = true;
    info
}

const fn issues(mut info: OpInfo, n: u8) -> OpInfo {
    info.issues = n;
    info
}

/// Immediate-offset (step = false) or post-incrementing (step = true)
/// load/store with its own major opcode.
const fn mem(
    op: Op,
    mnemonic: &'static str,
    major_op: u32,
    step: bool,
    operands: &'static [(Kind, Field)],
    contexts: Contexts,
    summary: &'static str,
) -> OpInfo {
    OpInfo {
        op,
        mnemonic,
        pattern: (major_op << 25) | if step { STEP_BIT } else { 0 },
        fixed_mask: MAJOR.mask() | STEP_BIT,
        operands,
        pipe: Main,
        contexts,
        control: false,
        issues: 1,
        summary,
    }
}

const R_M: &[(Kind, Field)] = &[(M, FD)];
const R_MINC: &[(Kind, Field)] = &[(MInc, FD)];
const R_MM: &[(Kind, Field)] = &[(M, FD), (M, FA)];
const R_MMM: &[(Kind, Field)] = &[(M, FD), (M, FA), (M, FB)];
const R_AM: &[(Kind, Field)] = &[(A, FD), (M, FA)];
const R_MA: &[(Kind, Field)] = &[(M, FD), (A, FA)];
const R_AA: &[(Kind, Field)] = &[(A, FD), (A, FA)];
const R_AAA: &[(Kind, Field)] = &[(A, FD), (A, FA), (A, FB)];
const R_PPP: &[(Kind, Field)] = &[(APair, FD), (APair, FA), (APair, FB)];
const R_PA: &[(Kind, Field)] = &[(APair, FD), (A, FA)];
const R_AP: &[(Kind, Field)] = &[(A, FD), (APair, FA)];
const R_PP: &[(Kind, Field)] = &[(APair, FD), (APair, FA)];
const R_P: &[(Kind, Field)] = &[(APair, FD)];
const R_Q: &[(Kind, Field)] = &[(AQuad, FD)];
const R_QPQ: &[(Kind, Field)] = &[(AQuad, FD), (APair, FA), (AQuad, FB)];
const R_PACC: &[(Kind, Field)] = &[(APair, FD), (AccPair, FA)];
const R_MC: &[(Kind, Field)] = &[(M, FD), (CReg, FA)];
const R_CM: &[(Kind, Field)] = &[(CReg, FD), (M, FA)];
const I_MMS: &[(Kind, Field)] = &[(M, FD), (M, FA), (SImm16, FI16)];
const I_MMU: &[(Kind, Field)] = &[(M, FD), (M, FA), (UImm16, FI16)];
const I_MMSH: &[(Kind, Field)] = &[(M, FD), (M, FA), (Shift, FI16)];
const I_MADDR: &[(Kind, Field)] = &[(M, FD), (Addr21, FI21)];
const I_AADDR: &[(Kind, Field)] = &[(A, FD), (Addr21, FI21)];
const I_MU: &[(Kind, Field)] = &[(M, FD), (UImm16, FI16)];
const I_AU: &[(Kind, Field)] = &[(A, FD), (UImm16, FI16)];
const I_ADDR: &[(Kind, Field)] = &[(Addr21, FI21)];
const I_RPT: &[(Kind, Field)] = &[(Count16, FCOUNT), (Len8, FLEN)];
const I_RPTR: &[(Kind, Field)] = &[(M, FD), (Len8, FLEN)];
const I_SYNC: &[(Kind, Field)] = &[(UImm16, FI16)];
const NONE: &[(Kind, Field)] = &[];

// Memory operand shapes: value register, base, offset.
const MR_M: &[(Kind, Field)] = &[(M, FD), (M, FA), (M, FB)];
const MR_A: &[(Kind, Field)] = &[(A, FD), (M, FA), (M, FB)];
const MR_P: &[(Kind, Field)] = &[(APair, FD), (M, FA), (M, FB)];
const MR_Q: &[(Kind, Field)] = &[(AQuad, FD), (M, FA), (M, FB)];
const MI_M: &[(Kind, Field)] = &[(M, FD), (M, FA), (SImm16, FI16)];
const MI_A: &[(Kind, Field)] = &[(A, FD), (M, FA), (SImm16, FI16)];
const MI_P: &[(Kind, Field)] = &[(APair, FD), (M, FA), (SImm16, FI16)];
const MI_Q: &[(Kind, Field)] = &[(AQuad, FD), (M, FA), (SImm16, FI16)];
const MS_M: &[(Kind, Field)] = &[(M, FD), (MInc, FA), (SImm16, FI16)];
const MS_A: &[(Kind, Field)] = &[(A, FD), (MInc, FA), (SImm16, FI16)];
const MS_P: &[(Kind, Field)] = &[(APair, FD), (MInc, FA), (SImm16, FI16)];
const MS_Q: &[(Kind, Field)] = &[(AQuad, FD), (MInc, FA), (SImm16, FI16)];
const MSR_P: &[(Kind, Field)] = &[(APair, FD), (MInc, FA), (M, FB)];
const PACE: &[(Kind, Field)] = &[(APair, FD), (APair, FA), (APair, FB), (MTriple, FC)];

/// The instruction table.
#[rustfmt::skip]
pub(super) static TABLE: &[OpInfo] = &[
    // System group.
    grouped(Op::Nop, "nop", G_SYS, 0, NONE, Main, Both, "Does nothing for one issue slot."),
    control(grouped(Op::Exitz, "exitz", G_SYS, 1, R_M, Main, Worker, "Ends the worker; its exit flag is set when the register is zero.")),
    control(grouped(Op::Halt, "halt", G_SYS, 2, NONE, Main, Sup, "Ends the tile program after waiting for all workers.")),
    control(grouped(Op::Run, "run", G_SYS, 3, R_MM, Main, Sup, "Starts the lowest free worker at the entry address in the first register with `$m0` = the second register.")),
    control(grouped(Op::Runall, "runall", G_SYS, 4, R_MM, Main, Sup, "Waits for all workers to be free, then starts all six at the entry address with `$m0` = the second register.")),
    grouped(Op::Get, "get", G_SYS, 5, R_MC, Main, Both, "Reads a control/status register."),
    grouped(Op::Put, "put", G_SYS, 6, R_CM, Main, Both, "Writes a writable control/status register."),
    control(grouped(Op::BrReg, "br", G_SYS, 7, R_M, Main, Both, "Jumps to the address in the register (returns from `call`).")),
    grouped(Op::Ampclr, "ampclr", G_SYS, 8, NONE, Aux, Worker, "Zeroes both AMP accumulator banks, the AMP phase and the CWEI write slot."),
    grouped(Op::Ldcwei, "ldcwei", G_SYS, 9, R_MINC, Main, Worker, "Loads 64 bits from the address into CWEI at the write slot, advances the slot (mod 64) and adds 8 to the register."),
    grouped(Op::Ld128cwei, "ld128cwei", G_SYS, 10, R_MINC, Main, Worker, "Loads 128 bits from interleaved memory at the address into CWEI at the write slot and the next, advances the slot by two (mod 64) and adds 16 to the register."),
    // Integer register forms.
    grouped(Op::AddR, "add", G_ALU, 0, R_MMM, Main, Both, "d = a + b (wrapping)."),
    grouped(Op::SubR, "sub", G_ALU, 1, R_MMM, Main, Both, "d = a - b (wrapping)."),
    grouped(Op::AndR, "and", G_ALU, 2, R_MMM, Main, Both, "d = a & b."),
    grouped(Op::OrR, "or", G_ALU, 3, R_MMM, Main, Both, "d = a | b."),
    grouped(Op::XorR, "xor", G_ALU, 4, R_MMM, Main, Both, "d = a ^ b."),
    grouped(Op::ShlR, "shl", G_ALU, 5, R_MMM, Main, Both, "d = a << b; 0 when b >= 32."),
    grouped(Op::ShrR, "shr", G_ALU, 6, R_MMM, Main, Both, "d = a >> b (logical); 0 when b >= 32."),
    grouped(Op::SarR, "sar", G_ALU, 7, R_MMM, Main, Both, "d = a >> b (arithmetic); sign fill when b >= 32."),
    grouped(Op::MulR, "mul", G_ALU, 8, R_MMM, Main, Both, "d = low 32 bits of a * b."),
    grouped(Op::MinR, "min", G_ALU, 9, R_MMM, Main, Both, "d = signed minimum of a and b."),
    grouped(Op::MaxR, "max", G_ALU, 10, R_MMM, Main, Both, "d = signed maximum of a and b."),
    grouped(Op::CmpeqR, "cmpeq", G_ALU, 11, R_MMM, Main, Both, "d = 1 if a == b else 0."),
    grouped(Op::CmpultR, "cmpult", G_ALU, 12, R_MMM, Main, Both, "d = 1 if a < b unsigned else 0."),
    grouped(Op::CmpsltR, "cmpslt", G_ALU, 13, R_MMM, Main, Both, "d = 1 if a < b signed else 0."),
    grouped(Op::MovMM, "mov", G_ALU, 14, R_MM, Main, Both, "d = a."),
    grouped(Op::MovAM, "mov", G_ALU, 15, R_AM, Main, Worker, "Copies the bits of an `$m` register into an `$a` register."),
    grouped(Op::MovMA, "mov", G_ALU, 16, R_MA, Main, Worker, "Copies the bits of an `$a` register into an `$m` register."),
    // Integer immediate forms.
    major(Op::AddI, "add", 0x04, I_MMS, Main, Both, "d = a + sext(imm)."),
    major(Op::SubI, "sub", 0x05, I_MMS, Main, Both, "d = a - sext(imm)."),
    major(Op::MulI, "mul", 0x06, I_MMS, Main, Both, "d = low 32 bits of a * sext(imm)."),
    major(Op::AndI, "and", 0x07, I_MMU, Main, Both, "d = a & zext(imm)."),
    major(Op::OrI, "or", 0x08, I_MMU, Main, Both, "d = a | zext(imm)."),
    major(Op::XorI, "xor", 0x09, I_MMU, Main, Both, "d = a ^ zext(imm)."),
    major(Op::ShlI, "shl", 0x0A, I_MMSH, Main, Both, "d = a << imm."),
    major(Op::ShrI, "shr", 0x0B, I_MMSH, Main, Both, "d = a >> imm (logical)."),
    major(Op::SarI, "sar", 0x0C, I_MMSH, Main, Both, "d = a >> imm (arithmetic)."),
    major(Op::MinI, "min", 0x0D, I_MMS, Main, Both, "d = signed minimum of a and sext(imm)."),
    major(Op::MaxI, "max", 0x0E, I_MMS, Main, Both, "d = signed maximum of a and sext(imm)."),
    major(Op::CmpeqI, "cmpeq", 0x0F, I_MMS, Main, Both, "d = 1 if a == sext(imm) else 0."),
    major(Op::CmpultI, "cmpult", 0x10, I_MMU, Main, Both, "d = 1 if a < zext(imm) unsigned else 0."),
    major(Op::CmpsltI, "cmpslt", 0x11, I_MMS, Main, Both, "d = 1 if a < sext(imm) signed else 0."),
    major(Op::SetziM, "setzi", 0x12, I_MADDR, Main, Both, "d = zext(imm21); loads any tile address."),
    major(Op::SetziA, "setzi", 0x13, I_AADDR, Aux, Worker, "d = zext(imm21) as raw bits."),
    major(Op::SethiM, "sethi", 0x14, I_MU, Main, Both, "d = (imm << 16) | (d & 0xffff); with `setzi` builds any 32-bit constant."),
    major(Op::SethiA, "sethi", 0x15, I_AU, Aux, Worker, "d = (imm << 16) | (d & 0xffff) on raw bits; builds f32 constants."),
    // Control.
    control(major(Op::Br, "br", 0x16, I_ADDR, Main, Both, "Jumps to the absolute address.")),
    control(major(Op::Brz, "brz", 0x17, I_MADDR, Main, Both, "Jumps when the register is zero.")),
    control(major(Op::Brnz, "brnz", 0x18, I_MADDR, Main, Both, "Jumps when the register is not zero.")),
    control(major(Op::Brnzdec, "brnzdec", 0x19, I_MADDR, Main, Both, "When the register is not zero, decrements it and jumps; a loop runs count + 1 times.")),
    control(major(Op::Call, "call", 0x1A, I_MADDR, Main, Both, "Writes the address after the call to the register and jumps.")),
    control(major(Op::RptI, "rpt", 0x1B, I_RPT, Main, Worker, "Runs the next len words count times with no loop overhead (count 0 skips them).")),
    control(major(Op::RptR, "rpt", 0x1C, I_RPTR, Main, Worker, "As `rpt` with the count from a register (at most 0xffff).")),
    control(major(Op::Sync, "sync", 0x1D, I_SYNC, Main, Sup, "Waits for all workers and ends the compute step; the tag tells the device what follows.")),
    // Floating point.
    grouped(Op::MovAA, "mov", G_FPU, 0, R_AA, Aux, Worker, "d = a (raw bits)."),
    grouped(Op::F32Add, "f32add", G_FPU, 1, R_AAA, Aux, Worker, "f32 d = a + b."),
    grouped(Op::F32Sub, "f32sub", G_FPU, 2, R_AAA, Aux, Worker, "f32 d = a - b."),
    grouped(Op::F32Mul, "f32mul", G_FPU, 3, R_AAA, Aux, Worker, "f32 d = a * b."),
    grouped(Op::F32Max, "f32max", G_FPU, 4, R_AAA, Aux, Worker, "f32 maximum (a NaN operand loses)."),
    grouped(Op::F32Min, "f32min", G_FPU, 5, R_AAA, Aux, Worker, "f32 minimum (a NaN operand loses)."),
    grouped(Op::F32v2Add, "f32v2add", G_FPU, 6, R_PPP, Aux, Worker, "Two f32 lanes: d = a + b."),
    grouped(Op::F32v2Sub, "f32v2sub", G_FPU, 7, R_PPP, Aux, Worker, "Two f32 lanes: d = a - b."),
    grouped(Op::F32v2Mul, "f32v2mul", G_FPU, 8, R_PPP, Aux, Worker, "Two f32 lanes: d = a * b."),
    grouped(Op::F32v2Max, "f32v2max", G_FPU, 9, R_PPP, Aux, Worker, "Two f32 lanes: maximum."),
    grouped(Op::F32v2Min, "f32v2min", G_FPU, 10, R_PPP, Aux, Worker, "Two f32 lanes: minimum."),
    grouped(Op::F16v2Add, "f16v2add", G_FPU, 11, R_AAA, Aux, Worker, "Two f16 lanes: d = a + b, correctly rounded."),
    grouped(Op::F16v2Sub, "f16v2sub", G_FPU, 12, R_AAA, Aux, Worker, "Two f16 lanes: d = a - b, correctly rounded."),
    grouped(Op::F16v2Mul, "f16v2mul", G_FPU, 13, R_AAA, Aux, Worker, "Two f16 lanes: d = a * b, correctly rounded."),
    grouped(Op::F16v2Max, "f16v2max", G_FPU, 14, R_AAA, Aux, Worker, "Two f16 lanes: maximum."),
    grouped(Op::F16v2Min, "f16v2min", G_FPU, 15, R_AAA, Aux, Worker, "Two f16 lanes: minimum."),
    grouped(Op::F16v4Add, "f16v4add", G_FPU, 16, R_PPP, Aux, Worker, "Four f16 lanes: d = a + b, correctly rounded."),
    grouped(Op::F16v4Sub, "f16v4sub", G_FPU, 17, R_PPP, Aux, Worker, "Four f16 lanes: d = a - b, correctly rounded."),
    grouped(Op::F16v4Mul, "f16v4mul", G_FPU, 18, R_PPP, Aux, Worker, "Four f16 lanes: d = a * b, correctly rounded."),
    grouped(Op::F16v4Max, "f16v4max", G_FPU, 19, R_PPP, Aux, Worker, "Four f16 lanes: maximum."),
    grouped(Op::F16v4Min, "f16v4min", G_FPU, 20, R_PPP, Aux, Worker, "Four f16 lanes: minimum."),
    issues(grouped(Op::F32Exp, "f32exp", G_FPU, 21, R_AA, Aux, Worker, "d = e^a, computed in f64 and rounded to f32."), 2),
    issues(grouped(Op::F32Rcp, "f32rcp", G_FPU, 22, R_AA, Aux, Worker, "d = 1 / a, computed in f64 and rounded to f32."), 2),
    issues(grouped(Op::F32Rsqrt, "f32rsqrt", G_FPU, 23, R_AA, Aux, Worker, "d = 1 / sqrt(a), computed in f64 and rounded to f32."), 2),
    issues(grouped(Op::F32Sqrt, "f32sqrt", G_FPU, 24, R_AA, Aux, Worker, "d = sqrt(a), correctly rounded."), 2),
    issues(grouped(Op::F32Erf, "f32erf", G_FPU, 25, R_AA, Aux, Worker, "d = erf(a), computed with `isa::erf` in f64 and rounded to f32."), 2),
    grouped(Op::F16ToF32, "f16tof32", G_FPU, 26, R_AA, Aux, Worker, "d = f32 of the low f16 half of a (exact)."),
    grouped(Op::F32ToF16, "f32tof16", G_FPU, 27, R_AA, Aux, Worker, "Low half of d = f16 of a (round to nearest even); high half 0."),
    grouped(Op::F16v2ToF32, "f16v2tof32", G_FPU, 28, R_PA, Aux, Worker, "Both f16 halves of a widened to two f32 lanes."),
    grouped(Op::F32v2ToF16, "f32v2tof16", G_FPU, 29, R_AP, Aux, Worker, "Two f32 lanes narrowed to the two f16 halves of d."),
    grouped(Op::F16v2Pack, "f16v2pack", G_FPU, 30, R_AAA, Aux, Worker, "d = low half of a | low half of b << 16."),
    grouped(Op::F32FromI32, "f32fromi32", G_FPU, 31, R_AA, Aux, Worker, "d = f32 of the signed integer bits of a."),
    grouped(Op::F32ToI32, "f32toi32", G_FPU, 32, R_AA, Aux, Worker, "d = a rounded to nearest even as a signed integer, saturated; NaN gives 0."),
    grouped(Op::F32v2Hadd, "f32v2hadd", G_FPU, 33, R_AP, Aux, Worker, "f32 d = a.0 + a.1."),
    grouped(Op::F32v2Hmax, "f32v2hmax", G_FPU, 34, R_AP, Aux, Worker, "f32 d = max(a.0, a.1)."),
    grouped(Op::F16v4Sum, "f16v4sum", G_FPU, 35, R_PP, Aux, Worker, "d = two f32 lanes (h0 + h1, h2 + h3), summed in f32."),
    grouped(Op::F16v4Hmax, "f16v4hmax", G_FPU, 36, R_AP, Aux, Worker, "f32 d = maximum of the four f16 lanes."),
    grouped(Op::F16v4ToF8, "f16v4tof8", G_FPU, 37, R_AP, Aux, Worker, "Four f16 lanes to four FP8 bytes with `$fp8cfg`'s format and scale."),
    grouped(Op::F8v4ToF16, "f8v4tof16", G_FPU, 38, R_PA, Aux, Worker, "Four FP8 bytes to four f16 lanes with `$fp8cfg`'s format and scale."),
    grouped(Op::F16v4Amp, "f16v4amp", G_FPU, 39, R_PPP, Aux, Worker, "AMP step, f16 inputs: 64 MACs; d = 4 f16 partials out, a = 4 f16 inputs, b = 4 f16 partials in."),
    grouped(Op::F8v8Amp, "f8v8amp", G_FPU, 40, R_PPP, Aux, Worker, "AMP step, FP8 inputs: 128 MACs; d = 4 f16 partials out, a = 8 FP8 inputs, b = 4 f16 partials in."),
    grouped(Op::F16v4Acc, "f16v4acc", G_FPU, 41, R_P, Aux, Worker, "Adds the four f16 lanes, widened to f32, to vector accumulators 0..3 (f32 sums)."),
    grouped(Op::F32v4Acc, "f32v4acc", G_FPU, 42, R_Q, Aux, Worker, "Adds the four f32 lanes to vector accumulators 0..3 (f32 sums)."),
    grouped(Op::F32v4SqAcc, "f32v4sqacc", G_FPU, 43, R_Q, Aux, Worker, "Adds the squares of the four f32 lanes to vector accumulators 0..3 (each square and sum in f64, rounded to f32 once)."),
    grouped(Op::F32v2Gina, "f32v2gina", G_FPU, 44, R_PACC, Aux, Worker, "d = vector accumulators 2i and 2i + 1 for pair i; both are then zeroed."),
    issues(grouped(Op::F32Div, "f32div", G_FPU, 45, R_AAA, Aux, Worker, "f32 d = a / b, correctly rounded."), 2),
    grouped(Op::F16v4SisoAmp, "f16v4sisoamp", G_FPU, 46, R_QPQ, Aux, Worker, "AMP step, f16 inputs, f32 partials: 64 MACs; d = 4 f32 partials out, a = 4 f16 inputs, b = 4 f32 partials in."),
    issues(grouped(Op::F16v2Exp, "f16v2exp", G_FPU, 47, R_AA, Aux, Worker, "Two f16 lanes: d = e^a, computed in f64 and rounded to f16."), 2),
    grouped(Op::Fnop, "fnop", G_FPU, 48, NONE, Aux, Worker, "Does nothing: fills the aux half of a bundle whose main instruction has no work beside it."),
    issues(grouped(Op::F16v2Erf, "f16v2erf", G_FPU, 49, R_AA, Aux, Worker, "Two f16 lanes: d = erf(a), computed with `isa::erf` in f64 and rounded to f16."), 2),
    // Register-offset loads and stores.
    grouped(Op::Ldz8R, "ldz8", G_MEM, 0, MR_M, Main, Both, "d = zext(byte at a + b)."),
    grouped(Op::Lds8R, "lds8", G_MEM, 1, MR_M, Main, Both, "d = sext(byte at a + b)."),
    grouped(Op::Ldz16R, "ldz16", G_MEM, 2, MR_M, Main, Both, "d = zext(16 bits at a + b)."),
    grouped(Op::Lds16R, "lds16", G_MEM, 3, MR_M, Main, Both, "d = sext(16 bits at a + b)."),
    grouped(Op::Ldb16R, "ldb16", G_MEM, 4, MR_A, Main, Worker, "Both halves of d = 16 bits at a + b."),
    grouped(Op::Ld32MR, "ld32", G_MEM, 5, MR_M, Main, Both, "d = 32 bits at a + b."),
    grouped(Op::Ld32AR, "ld32", G_MEM, 6, MR_A, Main, Worker, "d = 32 bits at a + b."),
    grouped(Op::Ld64R, "ld64", G_MEM, 7, MR_P, Main, Worker, "Pair d = 64 bits at a + b."),
    grouped(Op::Ld128R, "ld128", G_MEM, 8, MR_Q, Main, Worker, "Quad d = 128 bits at a + b (interleaved memory only)."),
    grouped(Op::St8R, "st8", G_MEM, 9, MR_M, Main, Both, "Stores the low byte of d at a + b."),
    grouped(Op::St16R, "st16", G_MEM, 10, MR_M, Main, Both, "Stores the low 16 bits of d at a + b."),
    grouped(Op::St32MR, "st32", G_MEM, 11, MR_M, Main, Both, "Stores d at a + b."),
    grouped(Op::St32AR, "st32", G_MEM, 12, MR_A, Main, Worker, "Stores d at a + b."),
    grouped(Op::St64R, "st64", G_MEM, 13, MR_P, Main, Worker, "Stores pair d at a + b."),
    grouped(Op::St128R, "st128", G_MEM, 14, MR_Q, Main, Worker, "Stores quad d at a + b (interleaved memory only)."),
    grouped(Op::Ld2xSt64Pace, "ld2xst64pace", G_MEM, 15, PACE, Main, Worker, "Loads d from [$mN] and a from [$mN+1] (both interleaved memory), stores b to [$mN+2], then adds 8 to all three."),
    grouped(Op::Ld64StepR, "ld64step", G_MEM, 16, MSR_P, Main, Worker, "Pair d = 64 bits at a; a += b."),
    grouped(Op::St64StepR, "st64step", G_MEM, 17, MSR_P, Main, Worker, "Stores pair d at a; a += b."),
];

/// Immediate-offset and post-incrementing memory forms: each shares a major
/// opcode with its twin and differs in the step bit.
#[rustfmt::skip]
pub(super) static MEM_TABLE: &[OpInfo] = &[
    mem(Op::Ldz8, "ldz8", 0x20, false, MI_M, Both, "d = zext(byte at a + imm)."),
    mem(Op::Lds8, "lds8", 0x21, false, MI_M, Both, "d = sext(byte at a + imm)."),
    mem(Op::Ldz16, "ldz16", 0x22, false, MI_M, Both, "d = zext(16 bits at a + imm)."),
    mem(Op::Lds16, "lds16", 0x23, false, MI_M, Both, "d = sext(16 bits at a + imm)."),
    mem(Op::Ldb16, "ldb16", 0x24, false, MI_A, Worker, "Both halves of d = 16 bits at a + imm."),
    mem(Op::Ld32M, "ld32", 0x25, false, MI_M, Both, "d = 32 bits at a + imm."),
    mem(Op::Ld32A, "ld32", 0x26, false, MI_A, Worker, "d = 32 bits at a + imm."),
    mem(Op::Ld64, "ld64", 0x27, false, MI_P, Worker, "Pair d = 64 bits at a + imm."),
    mem(Op::Ld128, "ld128", 0x28, false, MI_Q, Worker, "Quad d = 128 bits at a + imm (interleaved memory only)."),
    mem(Op::St8, "st8", 0x29, false, MI_M, Both, "Stores the low byte of d at a + imm."),
    mem(Op::St16, "st16", 0x2A, false, MI_M, Both, "Stores the low 16 bits of d at a + imm."),
    mem(Op::St32M, "st32", 0x2B, false, MI_M, Both, "Stores d at a + imm."),
    mem(Op::St32A, "st32", 0x2C, false, MI_A, Worker, "Stores d at a + imm."),
    mem(Op::St64, "st64", 0x2D, false, MI_P, Worker, "Stores pair d at a + imm."),
    mem(Op::St128, "st128", 0x2E, false, MI_Q, Worker, "Stores quad d at a + imm (interleaved memory only)."),
    mem(Op::Ldz8Step, "ldz8step", 0x20, true, MS_M, Both, "d = zext(byte at a); a += imm."),
    mem(Op::Lds8Step, "lds8step", 0x21, true, MS_M, Both, "d = sext(byte at a); a += imm."),
    mem(Op::Ldz16Step, "ldz16step", 0x22, true, MS_M, Both, "d = zext(16 bits at a); a += imm."),
    mem(Op::Lds16Step, "lds16step", 0x23, true, MS_M, Both, "d = sext(16 bits at a); a += imm."),
    mem(Op::Ldb16Step, "ldb16step", 0x24, true, MS_A, Worker, "Both halves of d = 16 bits at a; a += imm."),
    mem(Op::Ld32MStep, "ld32step", 0x25, true, MS_M, Both, "d = 32 bits at a; a += imm."),
    mem(Op::Ld32AStep, "ld32step", 0x26, true, MS_A, Worker, "d = 32 bits at a; a += imm."),
    mem(Op::Ld64Step, "ld64step", 0x27, true, MS_P, Worker, "Pair d = 64 bits at a; a += imm."),
    mem(Op::Ld128Step, "ld128step", 0x28, true, MS_Q, Worker, "Quad d = 128 bits at a; a += imm (interleaved memory only)."),
    mem(Op::St8Step, "st8step", 0x29, true, MS_M, Both, "Stores the low byte of d at a; a += imm."),
    mem(Op::St16Step, "st16step", 0x2A, true, MS_M, Both, "Stores the low 16 bits of d at a; a += imm."),
    mem(Op::St32MStep, "st32step", 0x2B, true, MS_M, Both, "Stores d at a; a += imm."),
    mem(Op::St32AStep, "st32step", 0x2C, true, MS_A, Worker, "Stores d at a; a += imm."),
    mem(Op::St64Step, "st64step", 0x2D, true, MS_P, Worker, "Stores pair d at a; a += imm."),
    mem(Op::St128Step, "st128step", 0x2E, true, MS_Q, Worker, "Stores quad d at a; a += imm (interleaved memory only)."),
];

/// Every row, in table order.
pub(super) fn all() -> impl Iterator<Item = &'static OpInfo> {
    TABLE.iter().chain(MEM_TABLE.iter())
}

/// The row of an op.
pub(crate) fn info(op: Op) -> &'static OpInfo {
    &lookup().by_op[op as usize]
}

pub(crate) struct Lookup {
    /// Rows indexed by `Op as usize`.
    pub by_op: Vec<OpInfo>,
    /// For each major opcode, the rows that use it.
    pub by_major: Vec<Vec<&'static OpInfo>>,
}

pub(crate) fn lookup() -> &'static Lookup {
    static LOOKUP: std::sync::OnceLock<Lookup> = std::sync::OnceLock::new();
    LOOKUP.get_or_init(|| {
        let mut rows: Vec<&'static OpInfo> = all().collect();
        rows.sort_by_key(|r| r.op as usize);
        let by_op = rows.iter().map(|r| **r).collect();
        let mut by_major = vec![Vec::new(); 1 << MAJOR.width];
        for row in all() {
            by_major[MAJOR.get(row.pattern) as usize].push(row);
        }
        Lookup { by_op, by_major }
    })
}

#[cfg(test)]
/// The reference table of `book/src/isa.md`, generated so the book cannot
/// drift from the encoder (a test checks the book contains it verbatim).
pub(super) fn markdown_table() -> String {
    let mut out = String::from(
        "| syntax | semantics | encoding | pipe | contexts | issues |\n|---|---|---|---|---|---|\n",
    );
    for row in all() {
        let operands: Vec<&str> = row.operands.iter().map(|(k, _)| k.syntax()).collect();
        let syntax = if operands.is_empty() {
            row.mnemonic.to_string()
        } else {
            format!("{} {}", row.mnemonic, operands.join(", "))
        };
        let major = MAJOR.get(row.pattern);
        let mut encoding = format!("major {major:#04x}");
        if row.fixed_mask & FFUNC.mask() != 0 {
            encoding.push_str(&format!(" func {}", FFUNC.get(row.pattern)));
        }
        if row.fixed_mask & STEP_BIT != 0 {
            encoding.push_str(if row.pattern & STEP_BIT != 0 {
                " S=1"
            } else {
                " S=0"
            });
        }
        let fields: Vec<&str> = row
            .operands
            .iter()
            .map(|(_, f)| match *f {
                FD => "D",
                FA => "A",
                FB => "B",
                FC => "C",
                FI16 => "I16",
                FI21 => "I21",
                FCOUNT => "I23..8",
                FLEN => "I7..0",
                _ => "?",
            })
            .collect();
        if !fields.is_empty() {
            encoding.push_str(&format!("; {}", fields.join(" ")));
        }
        let pipe = match row.pipe {
            Pipe::Main => "main",
            Pipe::Aux => "aux",
        };
        let contexts = match row.contexts {
            Contexts::Both => "both",
            Contexts::Worker => "worker",
            Contexts::Supervisor => "supervisor",
        };
        let control = if row.control { " (control)" } else { "" };
        out.push_str(&format!(
            "| `{syntax}` | {}{control} | {encoding} | {pipe} | {contexts} | {} |\n",
            row.summary.replace('|', "\\|"),
            row.issues
        ));
    }
    out
}
