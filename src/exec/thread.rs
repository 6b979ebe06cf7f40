//! One context's interpreter: runs decoded instructions until the context
//! needs the tile (a supervisor event or a worker exit) or faults.

use super::amp::{self, Amp};
use super::memory::MemoryView;
use super::program::{is_aux, Program, Slot};
use super::{Context, FaultCause};
use crate::isa::fp8::{decode_table, encode_table};
use crate::isa::{erf, ControlReg, Op};
use half::f16;

/// The register files of one context.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Regs {
    /// `$m0..$m15`; `m[15]` stays zero.
    pub m: [u32; 16],
    /// `$a0..$a15` as raw bits; `a[15]` stays zero.
    pub a: [u32; 16],
}

impl Regs {
    #[inline]
    fn set_m(&mut self, r: u8, v: u32) {
        if r != 15 {
            self.m[usize::from(r)] = v;
        }
    }

    #[inline]
    fn set_a(&mut self, r: u8, v: u32) {
        if r != 15 {
            self.a[usize::from(r)] = v;
        }
    }

    /// Operand fields are read before the instruction is known to use
    /// them as registers (`rpt $m, len` keeps its length in one), so a
    /// field beyond the register file reads as zero instead of panicking.
    #[inline]
    fn m(&self, r: u8) -> u32 {
        self.m.get(usize::from(r)).copied().unwrap_or(0)
    }

    #[inline]
    fn a(&self, r: u8) -> u32 {
        self.a[usize::from(r)]
    }

    #[inline]
    fn pair(&self, r: u8) -> u64 {
        u64::from(self.a(r)) | (u64::from(self.a(r + 1)) << 32)
    }

    #[inline]
    fn set_pair(&mut self, r: u8, v: u64) {
        self.set_a(r, v as u32);
        self.set_a(r + 1, (v >> 32) as u32);
    }
}

/// What a context asks of the tile when it stops without a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Event {
    Exit,
    Run { entry: u32, state: u32 },
    Runall { entry: u32, state: u32 },
    Sync(u16),
    Halt,
}

/// Counters of one context.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Issue slots used (each is six tile cycles).
    pub issues: u64,
    /// Instruction words executed (a bundle is two).
    pub instructions: u64,
    pub amp_macs: u64,
}

#[derive(Clone, Copy, Debug)]
struct Repeat {
    start: u32,
    end: u32,
    remaining: u32,
}

/// What the tile lends a context while it runs.
pub(super) struct Env<'a> {
    pub memory: MemoryView<'a>,
    pub program: &'a Program,
    pub tile: u32,
    pub wstatus: bool,
    pub region0: (u32, u32),
}

/// A supervisor or worker context.
#[derive(Clone)]
pub(super) struct Thread {
    pub context: Context,
    pub regs: Regs,
    pub pc: u32,
    pub fp8cfg: u32,
    pub amp: Box<Amp>,
    pub counts: Counts,
    /// Whether the last `exitz` saw a zero register.
    pub exit_ok: bool,
    repeat: Option<Repeat>,
}

enum Flow {
    Next,
    Jump(u32),
    Repeat { count: u32, len: u32 },
    Event(Event),
}

type Step<T> = Result<T, FaultCause>;

impl Thread {
    pub(super) fn new(context: Context) -> Thread {
        Thread {
            context,
            regs: Regs::default(),
            pc: 0,
            fp8cfg: 0,
            amp: Box::default(),
            counts: Counts::default(),
            exit_ok: true,
            repeat: None,
        }
    }

    /// Resets the context to start a worker function.
    pub(super) fn start(&mut self, entry: u32, state: u32) {
        self.regs = Regs::default();
        self.regs.m[0] = state;
        self.pc = entry;
        self.fp8cfg = 0;
        *self.amp = Amp::default();
        self.counts = Counts::default();
        self.exit_ok = true;
        self.repeat = None;
    }

    /// The decoded slot at `pc`: the program's (the hot path, kept small
    /// so it inlines into the execute loop), else [`Thread::decode_at`].
    #[inline]
    fn slot_at(&self, env: &Env, pc: u32) -> Step<Slot> {
        if !pc.is_multiple_of(4) || pc < env.region0.0 || pc >= env.region0.1 {
            return Err(FaultCause::ExecuteOutsideRegion0 { addr: pc });
        }
        match env.program.get(pc) {
            Some(slot) => Ok(*slot),
            None => Self::decode_at(env, pc),
        }
    }

    /// Outside the decoded program: decodes from memory (slow but exact).
    #[cold]
    fn decode_at(env: &Env, pc: u32) -> Step<Slot> {
        let word = env
            .memory
            .fetch(pc)
            .ok_or(FaultCause::ExecuteOutsideRegion0 { addr: pc })?;
        let mut slot = Slot::decode(word);
        if !slot.invalid && pc.is_multiple_of(8) {
            if let Some(next) = env.memory.fetch(pc + 4).map(Slot::decode) {
                slot.paired = !next.invalid && crate::isa::pairs(&slot.inst, &next.inst);
            }
        }
        Ok(slot)
    }

    #[inline]
    fn check(&self, slot: &Slot) -> Step<()> {
        let ok = match self.context {
            Context::Supervisor => slot.supervisor_ok,
            Context::Worker(_) => slot.worker_ok,
        };
        if slot.invalid {
            return Err(FaultCause::InvalidInstruction {
                word: slot.word,
                reason: "undecodable word",
            });
        }
        if !ok {
            return Err(FaultCause::InvalidInstruction {
                word: slot.word,
                reason: match self.context {
                    Context::Supervisor => "worker-only instruction in the supervisor",
                    Context::Worker(_) => "supervisor-only instruction in a worker",
                },
            });
        }
        if slot.control && self.repeat.is_some() {
            return Err(FaultCause::InvalidInstruction {
                word: slot.word,
                reason: "control flow inside a repeat body",
            });
        }
        Ok(())
    }

    /// Runs until an event, a fault, or `max_issues` issue slots in all
    /// (then a watchdog fault). On a fault `pc` is the faulting
    /// instruction's address.
    pub(super) fn run(&mut self, env: &mut Env, max_issues: u64) -> Step<Event> {
        loop {
            if self.counts.issues >= max_issues {
                return Err(FaultCause::Watchdog);
            }
            let pc = self.pc;
            let slot = self.slot_at(env, pc)?;
            self.check(&slot)?;
            // A pair whose aux word is past the end of a repeat body issues
            // alone: the body boundary splits it.
            let paired = slot.paired && self.repeat.is_none_or(|r| pc + 4 != r.end);
            let mut issues = slot.issues;
            let mut flow = self.execute(&slot, env)?;
            let mut next = pc + 4;
            self.counts.instructions += 1;
            if paired {
                let aux = self.slot_at(env, pc + 4)?;
                debug_assert!(is_aux(&aux.inst));
                self.pc = pc + 4;
                self.check(&aux)?;
                self.pc = pc;
                match self.execute(&aux, env) {
                    Ok(_) => {}
                    Err(e) => {
                        self.pc = pc + 4;
                        return Err(e);
                    }
                }
                issues = issues.max(aux.issues);
                self.counts.instructions += 1;
                next = pc + 8;
                flow = Flow::Next;
            }
            self.counts.issues += u64::from(issues);
            match flow {
                Flow::Next => {}
                Flow::Jump(target) => next = target,
                Flow::Repeat { count, len } => {
                    let end = next + 4 * len;
                    if count == 0 {
                        next = end;
                    } else {
                        self.repeat = Some(Repeat {
                            start: next,
                            end,
                            remaining: count,
                        });
                    }
                }
                Flow::Event(event) => {
                    self.pc = next;
                    return Ok(event);
                }
            }
            if let Some(r) = &mut self.repeat {
                if next == r.end {
                    r.remaining -= 1;
                    if r.remaining > 0 {
                        next = r.start;
                    } else {
                        self.repeat = None;
                    }
                }
            }
            self.pc = next;
        }
    }

    /// Executes one instruction; register and memory effects happen here.
    #[inline]
    fn execute(&mut self, slot: &Slot, env: &mut Env) -> Step<Flow> {
        let inst = slot.inst;
        let [d, a, b, c] = inst.r;
        let imm = inst.imm;
        let r = &mut self.regs;
        let mem = &mut env.memory;
        let ma = r.m(a);
        let mb = r.m(b);
        let simm = imm as u32;
        macro_rules! alu {
            ($v:expr) => {{
                r.set_m(d, $v);
            }};
        }
        macro_rules! f32op {
            ($f:expr) => {{
                let f: fn(f32, f32) -> f32 = $f;
                let v = f(f32::from_bits(r.a(a)), f32::from_bits(r.a(b)));
                r.set_a(d, v.to_bits());
            }};
        }
        macro_rules! f32v2op {
            ($f:expr) => {{
                let f: fn(f32, f32) -> f32 = $f;
                let (x, y) = (r.pair(a), r.pair(b));
                let lo = f(f32::from_bits(x as u32), f32::from_bits(y as u32));
                let hi = f(
                    f32::from_bits((x >> 32) as u32),
                    f32::from_bits((y >> 32) as u32),
                );
                r.set_pair(d, u64::from(lo.to_bits()) | (u64::from(hi.to_bits()) << 32));
            }};
        }
        macro_rules! f16v2op {
            ($f:expr) => {{
                let v = f16_lanes(u64::from(r.a(a)), u64::from(r.a(b)), 2, $f);
                r.set_a(d, v as u32);
            }};
        }
        macro_rules! f16v4op {
            ($f:expr) => {{
                let v = f16_lanes(r.pair(a), r.pair(b), 4, $f);
                r.set_pair(d, v);
            }};
        }
        macro_rules! f32un {
            ($f:expr) => {{
                let f: fn(f64) -> f64 = $f;
                let v = f(f64::from(f32::from_bits(r.a(a)))) as f32;
                r.set_a(d, v.to_bits());
            }};
        }
        match inst.op {
            Op::Nop | Op::Fnop => {}
            Op::Exitz => {
                self.exit_ok = r.m(d) == 0;
                return Ok(Flow::Event(Event::Exit));
            }
            Op::Halt => return Ok(Flow::Event(Event::Halt)),
            Op::Run => {
                return Ok(Flow::Event(Event::Run {
                    entry: r.m(d),
                    state: ma,
                }))
            }
            Op::Runall => {
                return Ok(Flow::Event(Event::Runall {
                    entry: r.m(d),
                    state: ma,
                }))
            }
            Op::Sync => return Ok(Flow::Event(Event::Sync(imm as u16))),
            Op::Get => {
                let v = match ControlReg::from_index(a) {
                    Some(ControlReg::Fp8Cfg) => self.fp8cfg,
                    Some(ControlReg::Wid) => match self.context {
                        Context::Worker(n) => u32::from(n),
                        Context::Supervisor => 6,
                    },
                    Some(ControlReg::Tile) => env.tile,
                    Some(ControlReg::WStatus) => u32::from(env.wstatus),
                    None => 0,
                };
                r.set_m(d, v);
            }
            Op::Put => match ControlReg::from_index(d) {
                Some(ControlReg::Fp8Cfg) => self.fp8cfg = ma,
                _ => {
                    return Err(FaultCause::InvalidInstruction {
                        word: slot.word,
                        reason: "write to a read-only control register",
                    })
                }
            },
            Op::BrReg => return Ok(Flow::Jump(r.m(d))),
            Op::Ampclr => self.amp.clear(),
            Op::Ldcwei => {
                let base = r.m(d);
                let bytes = mem.read::<8>(base)?;
                self.amp.load_weights(bytes);
                r.set_m(d, base.wrapping_add(8));
            }
            Op::Ld128cwei => {
                let base = r.m(d);
                mem.check_interleaved(base)?;
                let bytes = mem.read::<16>(base)?;
                self.amp.load_weights(bytes);
                r.set_m(d, base.wrapping_add(16));
            }
            Op::AddR => alu!(ma.wrapping_add(mb)),
            Op::SubR => alu!(ma.wrapping_sub(mb)),
            Op::AndR => alu!(ma & mb),
            Op::OrR => alu!(ma | mb),
            Op::XorR => alu!(ma ^ mb),
            Op::ShlR => alu!(ma.checked_shl(mb).unwrap_or(0)),
            Op::ShrR => alu!(ma.checked_shr(mb).unwrap_or(0)),
            Op::SarR => alu!(((ma as i32) >> mb.min(31)) as u32),
            Op::MulR => alu!(ma.wrapping_mul(mb)),
            Op::MinR => alu!((ma as i32).min(mb as i32) as u32),
            Op::MaxR => alu!((ma as i32).max(mb as i32) as u32),
            Op::CmpeqR => alu!(u32::from(ma == mb)),
            Op::CmpultR => alu!(u32::from(ma < mb)),
            Op::CmpsltR => alu!(u32::from((ma as i32) < (mb as i32))),
            Op::MovMM => alu!(ma),
            Op::MovAM => r.set_a(d, ma),
            Op::MovMA => alu!(r.a(a)),
            Op::AddI => alu!(ma.wrapping_add(simm)),
            Op::SubI => alu!(ma.wrapping_sub(simm)),
            Op::MulI => alu!(ma.wrapping_mul(simm)),
            Op::AndI => alu!(ma & simm),
            Op::OrI => alu!(ma | simm),
            Op::XorI => alu!(ma ^ simm),
            Op::ShlI => alu!(ma << simm),
            Op::ShrI => alu!(ma >> simm),
            Op::SarI => alu!(((ma as i32) >> simm) as u32),
            Op::MinI => alu!((ma as i32).min(imm) as u32),
            Op::MaxI => alu!((ma as i32).max(imm) as u32),
            Op::CmpeqI => alu!(u32::from(ma == simm)),
            Op::CmpultI => alu!(u32::from(ma < simm)),
            Op::CmpsltI => alu!(u32::from((ma as i32) < imm)),
            Op::SetziM => alu!(simm),
            Op::SetziA => r.set_a(d, simm),
            Op::SethiM => alu!((simm << 16) | (r.m(d) & 0xFFFF)),
            Op::SethiA => r.set_a(d, (simm << 16) | (r.a(d) & 0xFFFF)),
            Op::Br => return Ok(Flow::Jump(simm)),
            Op::Brz => {
                if r.m(d) == 0 {
                    return Ok(Flow::Jump(simm));
                }
            }
            Op::Brnz => {
                if r.m(d) != 0 {
                    return Ok(Flow::Jump(simm));
                }
            }
            Op::Brnzdec => {
                let v = r.m(d);
                if v != 0 {
                    r.set_m(d, v - 1);
                    return Ok(Flow::Jump(simm));
                }
            }
            Op::Call => {
                r.set_m(d, self.pc + 4);
                return Ok(Flow::Jump(simm));
            }
            Op::RptI => {
                return Ok(Flow::Repeat {
                    count: simm,
                    len: u32::from(d),
                })
            }
            Op::RptR => {
                let count = r.m(d);
                if count > 0xFFFF {
                    return Err(FaultCause::InvalidInstruction {
                        word: slot.word,
                        reason: "repeat count above 0xffff",
                    });
                }
                return Ok(Flow::Repeat {
                    count,
                    len: u32::from(a),
                });
            }
            Op::MovAA => r.set_a(d, r.a(a)),
            Op::F32Add => f32op!(|x, y| x + y),
            Op::F32Sub => f32op!(|x, y| x - y),
            Op::F32Mul => f32op!(|x, y| x * y),
            Op::F32Max => f32op!(f32::max),
            Op::F32Min => f32op!(f32::min),
            Op::F32v2Add => f32v2op!(|x, y| x + y),
            Op::F32v2Sub => f32v2op!(|x, y| x - y),
            Op::F32v2Mul => f32v2op!(|x, y| x * y),
            Op::F32v2Max => f32v2op!(f32::max),
            Op::F32v2Min => f32v2op!(f32::min),
            Op::F16v2Add => f16v2op!(|x, y| x + y),
            Op::F16v2Sub => f16v2op!(|x, y| x - y),
            Op::F16v2Mul => f16v2op!(|x, y| x * y),
            Op::F16v2Max => f16v2op!(f64::max),
            Op::F16v2Exp => f16v2op!(|x, _| x.exp()),
            Op::F16v2Erf => f16v2op!(|x, _| erf(x)),
            Op::F16v2Min => f16v2op!(f64::min),
            Op::F16v4Add => f16v4op!(|x, y| x + y),
            Op::F16v4Sub => f16v4op!(|x, y| x - y),
            Op::F16v4Mul => f16v4op!(|x, y| x * y),
            Op::F16v4Max => f16v4op!(f64::max),
            Op::F16v4Min => f16v4op!(f64::min),
            Op::F32Exp => f32un!(f64::exp),
            Op::F32Rcp => f32un!(|x| 1.0 / x),
            Op::F32Div => f32op!(|x, y| x / y),
            Op::F32Rsqrt => f32un!(|x| 1.0 / x.sqrt()),
            Op::F32Sqrt => f32un!(f64::sqrt),
            Op::F32Erf => f32un!(erf),
            Op::F16ToF32 => r.set_a(d, half_to_f32(r.a(a)).to_bits()),
            Op::F32ToF16 => r.set_a(
                d,
                u32::from(f16::from_f32(f32::from_bits(r.a(a))).to_bits()),
            ),
            Op::F16v2ToF32 => {
                let v = r.a(a);
                let lo = half_to_f32(v).to_bits();
                let hi = half_to_f32(v >> 16).to_bits();
                r.set_pair(d, u64::from(lo) | (u64::from(hi) << 32));
            }
            Op::F32v2ToF16 => {
                let p = r.pair(a);
                let lo = f16::from_f32(f32::from_bits(p as u32)).to_bits();
                let hi = f16::from_f32(f32::from_bits((p >> 32) as u32)).to_bits();
                r.set_a(d, u32::from(lo) | (u32::from(hi) << 16));
            }
            Op::F16v2Pack => r.set_a(d, (r.a(a) & 0xFFFF) | (r.a(b) << 16)),
            Op::F32FromI32 => r.set_a(d, (r.a(a) as i32 as f32).to_bits()),
            Op::F32ToI32 => {
                let v = f32::from_bits(r.a(a)).round_ties_even() as i32;
                r.set_a(d, v as u32);
            }
            Op::F32v2Hadd | Op::F32v2Hmax => {
                let p = r.pair(a);
                let (x, y) = (f32::from_bits(p as u32), f32::from_bits((p >> 32) as u32));
                let v = if inst.op == Op::F32v2Hadd {
                    x + y
                } else {
                    x.max(y)
                };
                r.set_a(d, v.to_bits());
            }
            Op::F16v4Sum => {
                let p = r.pair(a);
                let h: [f32; 4] = std::array::from_fn(|j| half_to_f32((p >> (16 * j)) as u32));
                let (lo, hi) = (h[0] + h[1], h[2] + h[3]);
                r.set_pair(d, u64::from(lo.to_bits()) | (u64::from(hi.to_bits()) << 32));
            }
            Op::F16v4Hmax => {
                let p = r.pair(a);
                let v = (0..4)
                    .map(|j| half_to_f32((p >> (16 * j)) as u32))
                    .fold(f32::NAN, f32::max);
                r.set_a(d, v.to_bits());
            }
            Op::F16v4ToF8 => {
                let p = r.pair(a);
                let table = encode_table(
                    amp::input_format(self.fp8cfg),
                    amp::input_scale(self.fp8cfg),
                );
                let mut v = 0u32;
                for j in 0..4 {
                    v |= u32::from(table[usize::from((p >> (16 * j)) as u16)]) << (8 * j);
                }
                r.set_a(d, v);
            }
            Op::F8v4ToF16 => {
                let v = r.a(a);
                let table = decode_table(
                    amp::input_format(self.fp8cfg),
                    amp::input_scale(self.fp8cfg),
                );
                let mut p = 0u64;
                for j in 0..4 {
                    p |= u64::from(table[((v >> (8 * j)) & 0xFF) as usize]) << (16 * j);
                }
                r.set_pair(d, p);
            }
            Op::F16v4Amp => {
                let out = self.amp.step_f16(r.pair(a), r.pair(b));
                r.set_pair(d, out);
                self.counts.amp_macs += 64;
            }
            Op::F16v4SisoAmp => {
                let partials_in: [f32; 4] =
                    std::array::from_fn(|j| f32::from_bits(r.a(b + j as u8)));
                let out = self.amp.step_f16_f32_partials(r.pair(a), partials_in);
                for (j, v) in out.iter().enumerate() {
                    r.set_a(d + j as u8, v.to_bits());
                }
                self.counts.amp_macs += 64;
            }
            Op::F8v8Amp => {
                let out = self.amp.step_f8(r.pair(a), r.pair(b), self.fp8cfg);
                r.set_pair(d, out);
                self.counts.amp_macs += 128;
            }
            Op::F16v4Acc => {
                let p = r.pair(d);
                for (j, acc) in self.amp.current[..4].iter_mut().enumerate() {
                    *acc += half_to_f32((p >> (16 * j)) as u32);
                }
            }
            Op::F32v4Acc | Op::F32v4SqAcc => {
                let square = inst.op == Op::F32v4SqAcc;
                for (j, acc) in self.amp.current[..4].iter_mut().enumerate() {
                    let v = f32::from_bits(r.a(d + j as u8));
                    *acc = if square {
                        (f64::from(*acc) + f64::from(v) * f64::from(v)) as f32
                    } else {
                        *acc + v
                    };
                }
            }
            Op::F32v2Gina => {
                let at = 2 * imm as usize;
                let pair = &mut self.amp.current[at..at + 2];
                r.set_pair(
                    d,
                    u64::from(pair[0].to_bits()) | (u64::from(pair[1].to_bits()) << 32),
                );
                pair.fill(0.0);
            }
            Op::Ld2xSt64Pace => {
                let (x_at, p_at, s_at) = (r.m(c), r.m(c + 1), r.m(c + 2));
                mem.check_interleaved(x_at)?;
                mem.check_interleaved(p_at)?;
                let x = u64::from_le_bytes(mem.read::<8>(x_at)?);
                let p = u64::from_le_bytes(mem.read::<8>(p_at)?);
                mem.write::<8>(s_at, r.pair(b).to_le_bytes())?;
                r.set_pair(d, x);
                r.set_pair(a, p);
                for k in 0..3 {
                    r.set_m(c + k, r.m(c + k).wrapping_add(8));
                }
            }
            _ => return self.memory_op(slot, mem),
        }
        Ok(Flow::Next)
    }

    /// Loads and stores in their three addressing forms.
    fn memory_op(&mut self, slot: &Slot, mem: &mut MemoryView) -> Step<Flow> {
        use Op::*;
        let inst = slot.inst;
        let [d, a, b, _] = inst.r;
        let r = &mut self.regs;
        let base = r.m(a);
        let (addr, step) = match inst.op {
            Ldz8R | Lds8R | Ldz16R | Lds16R | Ldb16R | Ld32MR | Ld32AR | Ld64R | Ld128R | St8R
            | St16R | St32MR | St32AR | St64R | St128R => (base.wrapping_add(r.m(b)), false),
            Ldz8Step | Lds8Step | Ldz16Step | Lds16Step | Ldb16Step | Ld32MStep | Ld32AStep
            | Ld64Step | Ld128Step | St8Step | St16Step | St32MStep | St32AStep | St64Step
            | St128Step | Ld64StepR | St64StepR => (base, true),
            _ => (base.wrapping_add(inst.imm as u32), false),
        };
        match inst.op {
            Ldz8R | Ldz8 | Ldz8Step => r.set_m(d, u32::from(mem.read::<1>(addr)?[0])),
            Lds8R | Lds8 | Lds8Step => r.set_m(d, mem.read::<1>(addr)?[0] as i8 as u32),
            Ldz16R | Ldz16 | Ldz16Step => {
                r.set_m(d, u32::from(u16::from_le_bytes(mem.read::<2>(addr)?)))
            }
            Lds16R | Lds16 | Lds16Step => {
                r.set_m(d, u16::from_le_bytes(mem.read::<2>(addr)?) as i16 as u32)
            }
            Ldb16R | Ldb16 | Ldb16Step => {
                let h = u32::from(u16::from_le_bytes(mem.read::<2>(addr)?));
                r.set_a(d, h | (h << 16));
            }
            Ld32MR | Ld32M | Ld32MStep => r.set_m(d, u32::from_le_bytes(mem.read::<4>(addr)?)),
            Ld32AR | Ld32A | Ld32AStep => r.set_a(d, u32::from_le_bytes(mem.read::<4>(addr)?)),
            Ld64R | Ld64 | Ld64Step | Ld64StepR => {
                r.set_pair(d, u64::from_le_bytes(mem.read::<8>(addr)?))
            }
            Ld128R | Ld128 | Ld128Step => {
                mem.check_interleaved(addr)?;
                let v = u128::from_le_bytes(mem.read::<16>(addr)?);
                r.set_pair(d, v as u64);
                r.set_pair(d + 2, (v >> 64) as u64);
            }
            St8R | St8 | St8Step => mem.write::<1>(addr, [r.m(d) as u8])?,
            St16R | St16 | St16Step => mem.write::<2>(addr, (r.m(d) as u16).to_le_bytes())?,
            St32MR | St32M | St32MStep => mem.write::<4>(addr, r.m(d).to_le_bytes())?,
            St32AR | St32A | St32AStep => mem.write::<4>(addr, r.a(d).to_le_bytes())?,
            St64R | St64 | St64Step | St64StepR => mem.write::<8>(addr, r.pair(d).to_le_bytes())?,
            St128R | St128 | St128Step => {
                mem.check_interleaved(addr)?;
                let v = u128::from(r.pair(d)) | (u128::from(r.pair(d + 2)) << 64);
                mem.write::<16>(addr, v.to_le_bytes())?;
            }
            _ => {
                return Err(FaultCause::InvalidInstruction {
                    word: slot.word,
                    reason: "instruction without an implementation",
                })
            }
        }
        if step {
            // The register-stride forms add their third operand; the others
            // their immediate.
            let delta = match inst.op {
                Ld64StepR | St64StepR => r.m(b),
                _ => inst.imm as u32,
            };
            r.set_m(a, base.wrapping_add(delta));
        }
        Ok(Flow::Next)
    }
}

#[inline]
fn half_to_f32(bits: u32) -> f32 {
    amp::f16_to_f32(bits as u16)
}

/// Lane-wise f16 arithmetic: exact in f64 (f16 sums and products fit its
/// 53-bit significand), then rounded to f16 once, so results are correctly
/// rounded.
#[inline]
fn f16_lanes(x: u64, y: u64, lanes: usize, f: fn(f64, f64) -> f64) -> u64 {
    let mut out = 0u64;
    for j in 0..lanes {
        let xv = f64::from(half_to_f32((x >> (16 * j)) as u32));
        let yv = f64::from(half_to_f32((y >> (16 * j)) as u32));
        out |= u64::from(crate::numerics::f16_from_f64(f(xv, yv)).to_bits()) << (16 * j);
    }
    out
}
