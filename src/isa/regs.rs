//! Register names: parsing the assembler's spelling and printing it back.

/// `$m15` always reads as zero; writes to it are discarded.
pub(super) const MZERO: u8 = 15;
/// `$a15` always reads as zero; writes to it are discarded.
pub(super) const AZERO: u8 = 15;

/// Control and status registers, read with `get` and written with `put`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControlReg {
    /// FP8 configuration: bit 0 the format of casts and AMP inputs
    /// (0 = F143, 1 = F152), bit 1 the format of AMP weights, bits 15..8 the
    /// signed scale of casts and AMP inputs, bits 23..16 the signed scale of
    /// AMP weights. Value = stored FP8 value × 2^scale.
    Fp8Cfg,
    /// The worker's context id 0..=5; 6 in the supervisor. Read-only.
    Wid,
    /// The tile id. Read-only.
    Tile,
    /// 1 when every worker of the last compute step (latched by `sync` or
    /// `halt`) ended with `exitz` of a zero register, else 0. Read-only.
    WStatus,
}

impl ControlReg {
    pub(super) const ALL: [ControlReg; 4] = [
        ControlReg::Fp8Cfg,
        ControlReg::Wid,
        ControlReg::Tile,
        ControlReg::WStatus,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            ControlReg::Fp8Cfg => "fp8cfg",
            ControlReg::Wid => "wid",
            ControlReg::Tile => "tile",
            ControlReg::WStatus => "wstatus",
        }
    }

    pub(super) fn index(self) -> u8 {
        self as u8
    }

    pub(crate) fn from_index(index: u8) -> Option<ControlReg> {
        ControlReg::ALL.get(usize::from(index)).copied()
    }

    pub(super) fn from_name(name: &str) -> Option<ControlReg> {
        ControlReg::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// Parses `m3`/`mzero` (class `'m'`) or `a3`/`azero` (class `'a'`).
pub(super) fn parse_single(name: &str, class: char) -> Option<u8> {
    let rest = name.strip_prefix(class)?;
    if rest == "zero" {
        return Some(15);
    }
    parse_index(rest)
}

fn parse_index(text: &str) -> Option<u8> {
    if text.is_empty() || text.len() > 2 || (text.len() == 2 && text.starts_with('0')) {
        return None;
    }
    let n: u8 = text.parse().ok()?;
    (n < 16).then_some(n)
}

/// Parses a range `c<first>:<last>` and returns `first` when the range has
/// exactly `len` registers.
pub(super) fn parse_range(name: &str, class: char, len: u8) -> Option<u8> {
    let rest = name.strip_prefix(class)?;
    let (first, last) = rest.split_once(':')?;
    let (first, last) = (parse_index(first)?, parse_index(last)?);
    (last >= first && last - first + 1 == len).then_some(first)
}

pub(super) fn m_name(n: u8) -> String {
    if n == MZERO {
        "$mzero".into()
    } else {
        format!("$m{n}")
    }
}

pub(super) fn a_name(n: u8) -> String {
    if n == AZERO {
        "$azero".into()
    } else {
        format!("$a{n}")
    }
}
