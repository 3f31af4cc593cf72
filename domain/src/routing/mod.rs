//! Where conversations enter and who answers them: connected channels, entry-point rules, channel defaults
//! and the resolver that applies them.

pub mod channels;
pub mod entry_points;
pub mod resolver;
