//! `GET /v1/tasks` and `PATCH /v1/tasks/{task_id}`: the account's tasks, newest first, and marking one done
//! or open again. Another account's task is as absent as a missing one.

use std::sync::Arc;

use frontdesk_api::v1::{ListTasksRequest, Task, TaskAnswer, TaskList, UpdateTaskRequest, tasks_server::Tasks};
use sea_orm::{ActiveEnum, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, sea_query::Expr};
use tonic::{Request, Response, Status};

use crate::{
    access::AccountId,
    clock::Clock,
    error::{ApiError, ApiResult},
    paging::{self, Page},
    platform_calls::account_of,
    store::entities::tasks,
    timestamps,
    validate::Violations,
};

pub struct TasksService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
}

impl TasksService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>) -> Self {
        Self { db, clock }
    }

    async fn list(&self, account_id: &AccountId, r: ListTasksRequest) -> ApiResult<TaskList> {
        let mut v = Violations::new();
        if !r.status.is_empty() {
            v.one_of_variants::<tasks::TaskStatus>("status", &r.status);
        }
        v.finish()?;
        let page = Page::checked(r.limit, &r.cursor, crate::ids::Kind::Task.prefix())?;
        let mut select = tasks::Entity::find().filter(tasks::Column::AccountId.eq(account_id));
        if !r.status.is_empty() {
            select = select.filter(tasks::Column::Status.eq(&r.status));
        }
        let (rows, more) = paging::fetch(&self.db, select, &page, tasks::Column::CreatedAt, tasks::Column::Id).await?;
        let (tasks, next_cursor) = paging::render(rows, more, |t| (t.created_at, t.id.as_str()), task_message);
        Ok(TaskList {
            success: true,
            tasks,
            next_cursor,
        })
    }

    async fn update(&self, account_id: &AccountId, r: UpdateTaskRequest) -> ApiResult<TaskAnswer> {
        let done = r
            .done
            .ok_or_else(|| ApiError::field("done", "is required: true or false"))?;
        let status = if done {
            tasks::TaskStatus::Done
        } else {
            tasks::TaskStatus::Open
        };
        let now = self.clock.now();
        // One statement: a concurrent update of the same task ends in one of the two states, never half.
        let changed = tasks::Entity::update_many()
            .col_expr(tasks::Column::Status, Expr::value(status))
            .col_expr(tasks::Column::UpdatedAt, Expr::value(now))
            .filter(tasks::Column::AccountId.eq(account_id))
            .filter(tasks::Column::Id.eq(&r.task_id))
            .exec_with_returning(&self.db)
            .await?;
        let task = changed.into_iter().next().ok_or_else(|| ApiError::not_found("task"))?;
        Ok(TaskAnswer {
            success: true,
            task: Some(task_message(task)),
        })
    }
}

pub fn task_message(t: tasks::Model) -> Task {
    Task {
        id: t.id,
        title: t.title,
        status: t.status.to_value(),
        kind: t.kind,
        reason: t.reason,
        contact_id: t.contact_id.into(),
        conversation_id: t.conversation_id.into(),
        agent_id: t.agent_id,
        due: t.due.map(timestamps::to_proto),
        created_at: Some(timestamps::to_proto(t.created_at)),
        updated_at: Some(timestamps::to_proto(t.updated_at)),
    }
}

#[tonic::async_trait]
impl Tasks for TasksService {
    async fn list_tasks(&self, request: Request<ListTasksRequest>) -> Result<Response<TaskList>, Status> {
        let account_id = account_of(&request)?;
        Ok(Response::new(self.list(&account_id, request.into_inner()).await?))
    }

    async fn update_task(&self, request: Request<UpdateTaskRequest>) -> Result<Response<TaskAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(Response::new(self.update(&account_id, request.into_inner()).await?))
    }
}
