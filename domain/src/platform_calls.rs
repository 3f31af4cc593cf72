//! What every platform handler shares: the account a call acts on, the fields a partial update names, and
//! the answer of a delete.

use frontdesk_api::v1::Deleted;
use tonic::{Request, Response};

use crate::{
    access::{AccountId, caller::Caller},
    error::{ApiError, ApiResult, FieldViolation},
};

/// The account the call acts on (an agency's sub-account when it names one).
pub fn account_of<T>(request: &Request<T>) -> ApiResult<AccountId> {
    Ok(Caller::of(request)?.account_id.clone())
}

pub fn deleted(id: String) -> Response<Deleted> {
    Response::new(Deleted { success: true, id })
}

/// Hands every path of an update mask to `set`, which answers whether it knows the field; the paths it does
/// not know (REST fills the mask from the body's keys) are a 400 naming `update_mask`.
pub fn apply_mask(
    mask: Option<&prost_types::FieldMask>,
    what: &str,
    mut set: impl FnMut(&str) -> bool,
) -> ApiResult<()> {
    let unknown: Vec<FieldViolation> = mask
        .map(|m| m.paths.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|path| !set(path))
        .map(|path| FieldViolation::new("update_mask", format!("`{path}` is not {what} field")))
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(unknown))
    }
}
