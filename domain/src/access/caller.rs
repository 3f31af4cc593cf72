//! Who is calling: set by the guard on every platform request, read by every platform handler. Handlers
//! act on `account_id`, the account the request is for (an agency's sub-account when it names one).

use tonic::Code;

use super::{AccountId, rate_limit::Decision};
use crate::error::Reason;
use crate::{
    error::{ApiError, ApiResult},
    store::entities::api_keys,
};

#[derive(Clone, Debug)]
pub struct Caller {
    /// The account the call acts on.
    pub account_id: AccountId,
    /// The key the call was made with (its hash, never the key).
    pub key: api_keys::Model,
    /// This request's rate-limit decision.
    pub rate: Decision,
}

impl Caller {
    pub fn of<T>(request: &tonic::Request<T>) -> ApiResult<&Self> {
        request.extensions().get::<Self>().ok_or_else(|| {
            ApiError::new(
                Code::Internal,
                Reason::Internal,
                "request reached a platform handler unguarded",
            )
        })
    }
}
