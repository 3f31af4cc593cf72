//! The one error type of the core. Domain code returns `ApiError`; it becomes a `tonic::Status` exactly once,
//! carrying the stable reason as `google.rpc.ErrorInfo` (upper case) and field problems as
//! `google.rpc.BadRequest`, which the REST edge turns into the API's error body.

use tonic::Code;
use tonic_types::{ErrorDetails, StatusExt};

pub use frontdesk_api::reason::Reason;
/// Domain of every `ErrorInfo` the service emits.
pub use frontdesk_api::wire::ERROR_DOMAIN;

/// One problem with one request field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldViolation {
    pub field: String,
    pub message: String,
}

impl FieldViolation {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct ApiError {
    pub code: Code,
    /// The stable reason clients branch on (`invalid_argument`, `unknown_order`, ...).
    pub reason: Reason,
    pub message: String,
    pub fields: Vec<FieldViolation>,
}

impl ApiError {
    pub fn new(code: Code, reason: Reason, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            fields: Vec::new(),
        }
    }

    /// A validation failure; the message summarises the first violation as `field: problem`, the form the
    /// edge's own refusals take. A violation's message is about its field without naming it ("must be ...",
    /// "no stage `x` on this account"), so the field is named once, whatever the message's wording.
    pub fn invalid(fields: Vec<FieldViolation>) -> Self {
        let message = match fields.as_slice() {
            [only] => format!("{}: {}", only.field, only.message),
            [first, rest @ ..] => format!("{}: {} (and {} more)", first.field, first.message, rest.len()),
            [] => "invalid request".to_owned(),
        };
        Self {
            fields,
            ..Self::new(Code::InvalidArgument, Reason::InvalidArgument, message)
        }
    }

    /// 400 naming one field.
    pub fn field(field: &str, message: impl Into<String>) -> Self {
        Self::invalid(vec![FieldViolation::new(field, message)])
    }

    /// 404 for a missing object, or another account's (the answer does not tell them apart).
    pub fn not_found(what: &str) -> Self {
        Self::new(Code::NotFound, Reason::NotFound, format!("no {what} with this id"))
    }

    /// 409: the object would duplicate one that exists.
    pub fn already_exists(message: impl Into<String>) -> Self {
        Self::new(Code::AlreadyExists, Reason::AlreadyExists, message)
    }

    /// 400: the request is well-formed but the object's state does not allow it.
    pub fn failed_precondition(message: impl Into<String>) -> Self {
        Self::new(Code::FailedPrecondition, Reason::FailedPrecondition, message)
    }

    /// An unexpected failure. The cause is logged here and never sent to the client.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(Code::Internal, Reason::Internal, "internal error")
    }
}

impl From<sea_orm::DbErr> for ApiError {
    fn from(err: sea_orm::DbErr) -> Self {
        match err {
            // The row was read, then deleted by a concurrent request before this one wrote it.
            sea_orm::DbErr::RecordNotUpdated => Self::new(Code::NotFound, Reason::NotFound, "it was deleted meanwhile"),
            // PostgreSQL refuses U+0000 in any text it is given, an id or a filter included. Text fields are
            // checked before they get here; this catches the rest, which a direct gRPC caller can send.
            err if has_sqlstate(&err, CHARACTER_NOT_IN_REPERTOIRE) => Self::new(
                Code::InvalidArgument,
                Reason::InvalidArgument,
                "a text value must not contain the NUL character (U+0000)",
            ),
            // PostgreSQL gave up waiting for a lock another transaction holds (FRONTDESK_DB_LOCK_TIMEOUT):
            // the data is busy, not broken, and a retry may well succeed.
            err if has_sqlstate(&err, LOCK_NOT_AVAILABLE) => {
                tracing::warn!(error = %err, "database lock not obtained in time");
                Self::new(
                    Code::Unavailable,
                    Reason::Unavailable,
                    "the data this call needs is locked by another change; retry shortly",
                )
            }
            // The statement ran past FRONTDESK_DB_STATEMENT_TIMEOUT (or was cancelled).
            err if has_sqlstate(&err, QUERY_CANCELED) => {
                tracing::warn!(error = %err, "database statement cancelled");
                Self::new(
                    Code::DeadlineExceeded,
                    Reason::DeadlineExceeded,
                    "the database did not finish this call in time",
                )
            }
            // The database could not be reached or dropped the connection (a restart, a failover, a full
            // pool): the statement did not run or its transaction rolled back, so the client may retry, and its
            // idempotency key makes a retried write safe.
            err if is_connection_loss(&err) => {
                tracing::warn!(error = %err, "database connection lost");
                Self::new(
                    Code::Unavailable,
                    Reason::Unavailable,
                    "the database is unavailable for a moment; retry shortly",
                )
            }
            err => Self::internal(format_args!("database: {err}")),
        }
    }
}

/// PostgreSQL's SQLSTATE for a lock not obtained within `lock_timeout` (lock_not_available).
const LOCK_NOT_AVAILABLE: &str = "55P03";
/// PostgreSQL's SQLSTATE for a statement cancelled, by `statement_timeout` among others (query_canceled).
const QUERY_CANCELED: &str = "57014";

/// PostgreSQL's SQLSTATE for a character its encoding cannot hold, which is what U+0000 gets.
const CHARACTER_NOT_IN_REPERTOIRE: &str = "22021";

/// SQLSTATE classes and codes of a connection PostgreSQL ended or refused: connection exceptions (class 08),
/// an administrator's or a crash's shutdown, a server still starting, too many connections.
const CONNECTION_LOSS_STATES: [&str; 4] = ["57P01", "57P02", "57P03", "53300"];

/// Whether `err` says the connection to the database failed rather than the statement.
fn is_connection_loss(err: &sea_orm::DbErr) -> bool {
    match err {
        sea_orm::DbErr::ConnectionAcquire(_) | sea_orm::DbErr::Conn(_) => true,
        sea_orm::DbErr::Query(sea_orm::RuntimeErr::SqlxError(e))
        | sea_orm::DbErr::Exec(sea_orm::RuntimeErr::SqlxError(e)) => match e.as_ref() {
            sea_orm::SqlxError::Io(_)
            | sea_orm::SqlxError::Tls(_)
            | sea_orm::SqlxError::Protocol(_)
            | sea_orm::SqlxError::PoolTimedOut
            | sea_orm::SqlxError::PoolClosed
            | sea_orm::SqlxError::WorkerCrashed => true,
            sea_orm::SqlxError::Database(db) => db
                .code()
                .is_some_and(|code| code.starts_with("08") || CONNECTION_LOSS_STATES.contains(&code.as_ref())),
            _ => false,
        },
        _ => false,
    }
}

/// Whether the database returned this error with SQLSTATE `code`.
fn has_sqlstate(err: &sea_orm::DbErr, code: &str) -> bool {
    match err {
        sea_orm::DbErr::Query(sea_orm::RuntimeErr::SqlxError(e))
        | sea_orm::DbErr::Exec(sea_orm::RuntimeErr::SqlxError(e)) => {
            e.as_database_error().and_then(|db| db.code()).as_deref() == Some(code)
        }
        _ => false,
    }
}

impl From<ApiError> for tonic::Status {
    fn from(err: ApiError) -> Self {
        let mut details = ErrorDetails::with_error_info(
            err.reason.as_str().to_ascii_uppercase(),
            ERROR_DOMAIN,
            std::collections::HashMap::<String, String>::new(),
        );
        for violation in err.fields {
            details.add_bad_request_violation(violation.field, violation.message);
        }
        tonic::Status::with_error_details(err.code, err.message, details)
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::{ApiError, FieldViolation};

    #[test]
    fn a_field_error_names_its_field_once() {
        let unknown = ApiError::field("stage", "no stage `lead` on this account");
        assert_eq!(unknown.message, "stage: no stage `lead` on this account");
        let two = ApiError::invalid(vec![
            FieldViolation::new("name", "is required"),
            FieldViolation::new("url", "must be an https URL"),
        ]);
        assert_eq!(two.message, "name: is required (and 1 more)");
        assert_eq!(
            two.fields[1].message, "must be an https URL",
            "violations keep their own wording"
        );
    }
}
