//! The `Summaries` service: `POST /v1/summaries` (`recap`) and `GET /v1/summaries/daily` (`daily`).

use std::sync::Arc;

use frontdesk_api::v1::{
    CreateSummaryRequest, DailySummaryAnswer, DailySummaryRequest, SummaryAnswer, summaries_server::Summaries,
};
use sea_orm::DatabaseConnection;
use tonic::{Request, Response, Status};

use super::{
    daily,
    day::Day,
    recap::{Recaps, Subject},
};
use crate::{
    clock::Clock,
    contacts::address::{E164Phone, Email},
    error::{ApiError, ApiResult, Reason},
    platform_calls::account_of,
    replies::provider_choice::Providers,
};

/// The JSON name of the phone field, as the API publishes it.
const PHONE: &str = "phoneNumber";

pub struct SummariesService {
    recaps: Recaps,
}

impl SummariesService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>, providers: Arc<Providers>) -> Self {
        Self {
            recaps: Recaps { db, clock, providers },
        }
    }
}

/// The one identity the request names.
fn subject(r: &CreateSummaryRequest) -> ApiResult<Subject> {
    let (phone, email) = (r.phone_number.trim(), r.email.trim());
    match (phone.is_empty(), email.is_empty()) {
        (true, true) => Err(ApiError::field(PHONE, "give phoneNumber or email")),
        (false, false) => Err(ApiError::field("email", "give phoneNumber or email, not both")),
        (false, true) => E164Phone::parse(phone)
            .map(Subject::Phone)
            .ok_or_else(|| ApiError::field(PHONE, "must be in E.164 format, e.g. +919812345678")),
        (true, false) => Email::parse(email)
            .map(Subject::Email)
            .ok_or_else(|| ApiError::field("email", "must be a valid e-mail address")),
    }
}

#[tonic::async_trait]
impl Summaries for SummariesService {
    async fn create_summary(&self, request: Request<CreateSummaryRequest>) -> Result<Response<SummaryAnswer>, Status> {
        let account_id = account_of(&request)?;
        let subject = subject(request.get_ref())?;
        let summary = self.recaps.create(&account_id, &subject).await.map_err(|err| {
            let busy = err.reason == Reason::RateLimited;
            let mut status = Status::from(err);
            if busy {
                // A recap takes seconds: one of those running is done by then.
                status
                    .metadata_mut()
                    .insert("retry-after", tonic::metadata::MetadataValue::from_static("5"));
            }
            status
        })?;
        Ok(Response::new(SummaryAnswer {
            success: true,
            summary: Some(summary),
        }))
    }

    async fn get_daily_summary(
        &self,
        request: Request<DailySummaryRequest>,
    ) -> Result<Response<DailySummaryAnswer>, Status> {
        let account_id = account_of(&request)?;
        let now = self.recaps.clock.now();
        let r = request.get_ref();
        let day = Day::parse(r.date.trim(), r.tz.trim(), now)?;
        let summary = daily::summary(&self.recaps.db, &account_id, &day, now).await?;
        Ok(Response::new(DailySummaryAnswer {
            success: true,
            daily_summary: Some(summary),
        }))
    }
}
