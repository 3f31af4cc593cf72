//! Fields off encoded protobuf, refusing what prost refuses: truncated values, varints over ten bytes or
//! 64 bits, keys over 32 bits, field number 0, wire types 6 and 7, unmatched or too deeply nested groups.

use super::MAX_DEPTH;

/// A response the core sent that is not valid protobuf for its declared message.
#[derive(Debug, thiserror::Error)]
#[error("malformed response: {0}")]
pub struct WireError(String);

pub(super) fn malformed(what: impl Into<String>) -> WireError {
    WireError(what.into())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WireType {
    Varint,
    Fixed64,
    Delimited,
    StartGroup,
    EndGroup,
    Fixed32,
}

/// One value as it appears on the wire.
#[derive(Clone, Copy)]
pub(super) enum Raw<'a> {
    Varint(u64),
    Fixed32(u32),
    Fixed64(u64),
    Delimited(&'a [u8]),
    /// A (proto2) group, already skipped: only ever an unknown field here.
    Group,
}

pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

// The per-field reads are forced inline: called, each returned its `Result` through memory and the writer
// stalled on reading it back (a fifth of its time; docs/benchmarks/api-and-keys.md, "Deals list, third pass").
impl<'a> Reader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    pub(super) fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    /// The next field's number, wire type and value, or `None` at the end. `depth` is the nesting of the
    /// message being read, which bounds the groups inside it.
    #[inline(always)]
    pub(super) fn field(&mut self, depth: usize) -> Result<Option<(u32, WireType, Raw<'a>)>, WireError> {
        if self.done() {
            return Ok(None);
        }
        let (number, wire) = self.key()?;
        let raw = match wire {
            WireType::StartGroup => {
                self.skip_group(number, depth + 1)?;
                Raw::Group
            }
            WireType::EndGroup => return Err(malformed("end of a group that was not started")),
            wire => self.value(wire)?,
        };
        Ok(Some((number, wire, raw)))
    }

    /// One value of a wire type other than a group's (a field's, or an item of a packed run).
    #[inline(always)]
    pub(super) fn value(&mut self, wire: WireType) -> Result<Raw<'a>, WireError> {
        Ok(match wire {
            WireType::Varint => Raw::Varint(self.varint()?),
            WireType::Fixed64 => Raw::Fixed64(u64::from_le_bytes(self.array()?)),
            WireType::Fixed32 => Raw::Fixed32(u32::from_le_bytes(self.array()?)),
            WireType::Delimited => {
                let len = usize::try_from(self.varint()?).map_err(|_| malformed("length out of range"))?;
                Raw::Delimited(self.take(len)?)
            }
            WireType::StartGroup | WireType::EndGroup => return Err(malformed("a group where a value belongs")),
        })
    }

    #[inline(always)]
    fn key(&mut self) -> Result<(u32, WireType), WireError> {
        let key = u32::try_from(self.varint()?).map_err(|_| malformed("key out of range"))?;
        let wire = match key & 7 {
            0 => WireType::Varint,
            1 => WireType::Fixed64,
            2 => WireType::Delimited,
            3 => WireType::StartGroup,
            4 => WireType::EndGroup,
            5 => WireType::Fixed32,
            other => return Err(malformed(format!("wire type {other}"))),
        };
        match key >> 3 {
            0 => Err(malformed("field number 0")),
            number => Ok((number, wire)),
        }
    }

    /// Skips group `number` up to its own end, groups inside it included.
    fn skip_group(&mut self, number: u32, depth: usize) -> Result<(), WireError> {
        if depth > MAX_DEPTH {
            return Err(malformed("groups nested too deeply"));
        }
        loop {
            if self.done() {
                return Err(malformed("unterminated group"));
            }
            match self.key()? {
                (end, WireType::EndGroup) if end == number => return Ok(()),
                (_, WireType::EndGroup) => return Err(malformed("a group ended by another's end")),
                (inner, WireType::StartGroup) => self.skip_group(inner, depth + 1)?,
                (_, wire) => {
                    self.value(wire)?;
                }
            }
        }
    }

    #[inline(always)]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }

    #[inline(always)]
    fn take(&mut self, len: usize) -> Result<&'a [u8], WireError> {
        let end = self
            .at
            .checked_add(len)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| malformed("truncated"))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    #[inline(always)]
    fn varint(&mut self) -> Result<u64, WireError> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let byte = *self.bytes.get(self.at).ok_or_else(|| malformed("truncated varint"))?;
            self.at += 1;
            if shift == 63 && byte > 1 {
                return Err(malformed("varint overflows 64 bits"));
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(malformed("varint longer than 10 bytes"))
    }
}
