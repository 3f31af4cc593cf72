//! `GET /v1/credits`: the account's balance and its ledger, newest first. Every charge (an AI reply, a
//! knowledge import) and every grant writes an entry in the same transaction as the balance it moves, so
//! the two always agree.

use frontdesk_api::v1::{CreditBalance, CreditEntry, CreditsAnswer, GetCreditsRequest, credits_server};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use tonic::{Request, Response, Status};

use crate::{
    accounts::credits::to_decimal,
    error::ApiError,
    paging::{self, Page},
    platform_calls::account_of,
    store::entities::credit_ledger,
    timestamps,
};

pub struct CreditsService {
    db: DatabaseConnection,
}

impl CreditsService {
    pub fn new(db: DatabaseConnection) -> Self {
        Self { db }
    }
}

fn entry(row: credit_ledger::Model) -> CreditEntry {
    CreditEntry {
        id: row.id,
        amount: to_decimal(row.delta_milli),
        reason: row.reason,
        conversation_id: row.conversation_id.map(String::from).unwrap_or_default(),
        created_at: Some(timestamps::to_proto(row.created_at)),
    }
}

#[tonic::async_trait]
impl credits_server::Credits for CreditsService {
    async fn get_credits(&self, request: Request<GetCreditsRequest>) -> Result<Response<CreditsAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let page = Page::checked(r.limit, &r.cursor, crate::ids::Kind::LedgerEntry.prefix())?;
        let account = crate::accounts::store::find_live(&self.db, account_id.as_str()).await?;
        let select = credit_ledger::Entity::find().filter(credit_ledger::Column::AccountId.eq(&account_id));
        let (rows, more) = paging::fetch(
            &self.db,
            select,
            &page,
            credit_ledger::Column::CreatedAt,
            credit_ledger::Column::Id,
        )
        .await
        .map_err(ApiError::from)?;
        let (entries, next_cursor) = paging::render(rows, more, |e| (e.created_at, e.id.as_str()), entry);
        Ok(Response::new(CreditsAnswer {
            success: true,
            credits: Some(CreditBalance {
                balance: to_decimal(account.credit_milli),
                entries,
            }),
            next_cursor,
        }))
    }
}
