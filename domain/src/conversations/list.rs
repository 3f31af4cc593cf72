//! The inbox: the account's conversations filtered by every parameter given, latest activity first
//! (`last_message_at`, then id, both descending), so a conversation with a new message comes back to the
//! top. Pages continue strictly after the cursor's (last_message_at, id); a conversation that moves to the
//! top while a client pages is on the first page again, not twice on later ones. The index holds each
//! conversation's activity window, not its exact time (`activity`): the scan walks the windows newest first
//! and sorts each window's rows by time, which is the same order.

use frontdesk_api::v1::ListConversationsRequest;
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    sea_query::{Expr, ExprTrait, Func},
};

use super::activity;
use crate::{
    access::AccountId,
    error::ApiResult,
    paging::{self, Page},
    store::entities::conversations::{self, Column},
    validate::Violations,
};

/// The list's filters; empty strings and `None` do not filter.
pub struct Filters {
    status: String,
    channel: String,
    contact_id: String,
    agent_id: String,
    unread: Option<bool>,
    handoff: Option<bool>,
}

impl Filters {
    /// The filters and page a request asks for, or the 400 naming every bad parameter.
    pub fn parse(r: &ListConversationsRequest) -> ApiResult<(Self, Page)> {
        let mut v = Violations::new();
        if !r.status.is_empty() {
            v.one_of_variants::<conversations::ConversationStatus>("status", &r.status);
        }
        let mut paging = Vec::new();
        let page = Page::parse(r.limit, &r.cursor, crate::ids::Kind::Conversation.prefix(), &mut paging);
        paging.into_iter().for_each(|violation| v.push(violation));
        v.finish()?;
        let filters = Self {
            status: r.status.clone(),
            channel: r.channel.clone(),
            contact_id: r.contact_id.clone(),
            agent_id: r.agent_id.clone(),
            unread: r.unread,
            handoff: r.handoff,
        };
        Ok((filters, page))
    }

    fn condition(&self, account_id: &AccountId) -> Condition {
        let mut condition = Condition::all().add(Column::AccountId.eq(account_id));
        if !self.status.is_empty() {
            // Compared lowered (statuses are lower case) so that no index applies to it: with `status = 'open'`
            // SQLite's planner took the partial index of open conversations and sorted all of the account's
            // open ones (112 ms at 1,000,000 conversations), where the activity index reads one page.
            condition = condition.add(Expr::expr(Func::lower(Expr::col(Column::Status))).eq(self.status.as_str()));
        }
        for (column, value) in [
            (Column::Channel, &self.channel),
            (Column::ContactId, &self.contact_id),
            (Column::AgentId, &self.agent_id),
        ] {
            if !value.is_empty() {
                condition = condition.add(column.eq(value.as_str()));
            }
        }
        match self.unread {
            Some(true) => condition = condition.add(Column::UnreadCount.gt(0)),
            Some(false) => condition = condition.add(Column::UnreadCount.eq(0)),
            None => {}
        }
        // Written into the SQL rather than bound: a generic plan cannot use the partial index of handoffs.
        match self.handoff {
            Some(true) => condition = condition.add(Expr::cust("handoff")),
            Some(false) => condition = condition.add(Expr::cust("NOT handoff")),
            None => {}
        }
        condition
    }
}

/// One page of the account's conversations, latest activity first, and whether another follows.
pub async fn page(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    filters: &Filters,
    page: &Page,
) -> Result<(Vec<conversations::Model>, bool), DbErr> {
    let mut select = conversations::Entity::find().filter(filters.condition(account_id));
    if let Some(after) = &page.after {
        // Implied by the cursor's (time, id) bound, and what lets the index skip the newer windows.
        select = select.filter(Column::ActivityBucket.lte(activity::bucket(after.created_at)));
    }
    let select = select.order_by_desc(Column::ActivityBucket);
    paging::fetch(db, select, page, Column::LastMessageAt, Column::Id).await
}
