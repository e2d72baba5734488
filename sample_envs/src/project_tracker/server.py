import os
from datetime import datetime
from typing import List, Optional

from fastapi import FastAPI, Query
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Column, ForeignKey, Integer, String, Text, UniqueConstraint, create_engine, func, or_
from sqlalchemy.orm import declarative_base, sessionmaker

DATABASE_PATH = os.environ.get("DATABASE_PATH", "sqlite:///project_tracker.db")
engine = create_engine(DATABASE_PATH, connect_args={"check_same_thread": False})
SessionLocal = sessionmaker(bind=engine, autocommit=False, autoflush=False)
Base = declarative_base()


class User(Base):
    __tablename__ = "users"
    id = Column(Integer, primary_key=True)
    username = Column(String, nullable=False, unique=True)
    full_name = Column(String, nullable=False)
    email = Column(String, nullable=False, unique=True)
    role = Column(String, nullable=False, default="member")
    timezone = Column(String, nullable=False, default="UTC")
    is_active = Column(Integer, nullable=False, default=1)
    created_at = Column(String, nullable=False)


class Workspace(Base):
    __tablename__ = "workspaces"
    id = Column(Integer, primary_key=True)
    name = Column(String, nullable=False, unique=True)
    slug = Column(String, nullable=False, unique=True)
    owner_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    plan = Column(String, nullable=False, default="free")
    created_at = Column(String, nullable=False)


class Project(Base):
    __tablename__ = "projects"
    __table_args__ = (UniqueConstraint("workspace_id", "name"),)
    id = Column(Integer, primary_key=True)
    workspace_id = Column(Integer, ForeignKey("workspaces.id"), nullable=False)
    project_key = Column(String, nullable=False, unique=True)
    name = Column(String, nullable=False)
    description = Column(Text)
    lead_id = Column(Integer, ForeignKey("users.id"))
    status = Column(String, nullable=False, default="active")
    next_issue_number = Column(Integer, nullable=False, default=1)
    created_at = Column(String, nullable=False)


class ProjectMember(Base):
    __tablename__ = "project_members"
    __table_args__ = (UniqueConstraint("project_id", "user_id"),)
    id = Column(Integer, primary_key=True)
    project_id = Column(Integer, ForeignKey("projects.id"), nullable=False)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    role = Column(String, nullable=False, default="developer")
    joined_at = Column(String, nullable=False)


class Sprint(Base):
    __tablename__ = "sprints"
    __table_args__ = (UniqueConstraint("project_id", "name"),)
    id = Column(Integer, primary_key=True)
    project_id = Column(Integer, ForeignKey("projects.id"), nullable=False)
    name = Column(String, nullable=False)
    goal = Column(Text)
    start_date = Column(String, nullable=False)
    end_date = Column(String, nullable=False)
    status = Column(String, nullable=False, default="planned")
    completed_at = Column(String)
    created_at = Column(String, nullable=False)


class Label(Base):
    __tablename__ = "labels"
    __table_args__ = (UniqueConstraint("project_id", "name"),)
    id = Column(Integer, primary_key=True)
    project_id = Column(Integer, ForeignKey("projects.id"), nullable=False)
    name = Column(String, nullable=False)
    color = Column(String, nullable=False, default="#6B7280")
    created_at = Column(String, nullable=False)


class Issue(Base):
    __tablename__ = "issues"
    id = Column(Integer, primary_key=True)
    project_id = Column(Integer, ForeignKey("projects.id"), nullable=False)
    sprint_id = Column(Integer, ForeignKey("sprints.id"))
    issue_key = Column(String, nullable=False, unique=True)
    title = Column(String, nullable=False)
    description = Column(Text)
    issue_type = Column(String, nullable=False, default="task")
    status = Column(String, nullable=False, default="backlog")
    priority = Column(String, nullable=False, default="medium")
    story_points = Column(Integer)
    reporter_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    assignee_id = Column(Integer, ForeignKey("users.id"))
    due_date = Column(String)
    created_at = Column(String, nullable=False)
    updated_at = Column(String, nullable=False)
    resolved_at = Column(String)


class IssueLabel(Base):
    __tablename__ = "issue_labels"
    __table_args__ = (UniqueConstraint("issue_id", "label_id"),)
    id = Column(Integer, primary_key=True)
    issue_id = Column(Integer, ForeignKey("issues.id"), nullable=False)
    label_id = Column(Integer, ForeignKey("labels.id"), nullable=False)
    added_at = Column(String, nullable=False)


class Comment(Base):
    __tablename__ = "comments"
    id = Column(Integer, primary_key=True)
    issue_id = Column(Integer, ForeignKey("issues.id"), nullable=False)
    author_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    body = Column(Text, nullable=False)
    created_at = Column(String, nullable=False)
    edited_at = Column(String)


class TimeLog(Base):
    __tablename__ = "time_logs"
    id = Column(Integer, primary_key=True)
    issue_id = Column(Integer, ForeignKey("issues.id"), nullable=False)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    minutes = Column(Integer, nullable=False)
    work_date = Column(String, nullable=False)
    note = Column(Text)
    created_at = Column(String, nullable=False)


Base.metadata.create_all(engine)

app = FastAPI(title="Sprintboard Project Tracker API", version="1.0.0")


def now_text():
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S")


class UserOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="User id", examples=[1])
    username: str = Field(..., description="Unique login handle", examples=["mpatel"])
    full_name: str = Field(..., description="Display name", examples=["Maya Patel"])
    email: str = Field(..., description="Email address", examples=["maya.patel@northwind.io"])
    role: str = Field(..., description="Workspace role: admin, member or viewer", examples=["member"])
    timezone: str = Field(..., description="IANA timezone", examples=["America/New_York"])
    is_active: int = Field(..., description="1 if the account is active, 0 if deactivated", examples=[1])
    created_at: str = Field(..., description="Account creation timestamp", examples=["2025-06-02 09:00:00"])


class WorkspaceOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Workspace id", examples=[1])
    name: str = Field(..., description="Workspace name", examples=["Northwind Labs"])
    slug: str = Field(..., description="URL slug", examples=["northwind-labs"])
    owner_id: int = Field(..., description="User id of the owner", examples=[2])
    plan: str = Field(..., description="Billing plan: free, team or enterprise", examples=["team"])
    created_at: str = Field(..., description="Creation timestamp", examples=["2025-05-12 09:00:00"])


class ProjectOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Project id", examples=[1])
    workspace_id: int = Field(..., description="Workspace the project belongs to", examples=[1])
    project_key: str = Field(..., description="Short key used as issue key prefix", examples=["WEB"])
    name: str = Field(..., description="Project name", examples=["Customer Web Portal"])
    description: Optional[str] = Field(None, description="Project description", examples=["Customer-facing web portal"])
    lead_id: Optional[int] = Field(None, description="User id of the project lead", examples=[2])
    status: str = Field(..., description="active or archived", examples=["active"])
    next_issue_number: int = Field(..., description="Number the next created issue key will use", examples=[10])
    created_at: str = Field(..., description="Creation timestamp", examples=["2025-06-01 10:00:00"])


class MemberOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Membership id", examples=[2])
    project_id: int = Field(..., description="Project id", examples=[1])
    user_id: int = Field(..., description="User id", examples=[1])
    full_name: str = Field(..., description="Member display name", examples=["Maya Patel"])
    role: str = Field(..., description="Project role: owner, maintainer, developer or viewer", examples=["developer"])
    joined_at: str = Field(..., description="When the user joined the project", examples=["2025-06-02 09:30:00"])


class MemberCreate(BaseModel):
    user_id: int = Field(..., description="User id to add to the project", examples=[6])
    role: str = Field("developer", description="Project role: owner, maintainer, developer or viewer", examples=["maintainer"])


class SprintOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Sprint id", examples=[2])
    project_id: int = Field(..., description="Project id", examples=[1])
    name: str = Field(..., description="Sprint name (unique within a project)", examples=["Sprint 15"])
    goal: Optional[str] = Field(None, description="Sprint goal", examples=["Accessibility fixes and session hardening"])
    start_date: str = Field(..., description="First day (YYYY-MM-DD)", examples=["2026-03-02"])
    end_date: str = Field(..., description="Last day (YYYY-MM-DD)", examples=["2026-03-15"])
    status: str = Field(..., description="planned, active or completed", examples=["active"])
    completed_at: Optional[str] = Field(None, description="When the sprint was completed", examples=[None])
    created_at: str = Field(..., description="Creation timestamp", examples=["2026-02-24 10:00:00"])


class SprintCreate(BaseModel):
    project_id: int = Field(..., description="Project id", examples=[1])
    name: str = Field(..., description="Sprint name", examples=["Sprint 17"])
    goal: Optional[str] = Field(None, description="Sprint goal", examples=["Launch accessibility audit fixes"])
    start_date: str = Field(..., description="First day (YYYY-MM-DD)", examples=["2026-03-30"])
    end_date: str = Field(..., description="Last day (YYYY-MM-DD)", examples=["2026-04-12"])


class SprintCompleteOut(BaseModel):
    sprint: SprintOut = Field(..., description="The completed sprint")
    moved_issue_keys: List[str] = Field(..., description="Keys of unfinished issues that were moved", examples=[["WEB-3", "WEB-4"]])
    moved_to_sprint_id: Optional[int] = Field(None, description="Sprint that received the issues, null for backlog", examples=[3])


class LabelOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Label id", examples=[8])
    project_id: int = Field(..., description="Project the label belongs to", examples=[2])
    name: str = Field(..., description="Label name", examples=["performance"])
    color: str = Field(..., description="Hex color", examples=["#F97316"])
    created_at: str = Field(..., description="Creation timestamp", examples=["2025-07-01 10:00:00"])


class IssueOut(BaseModel):
    id: int = Field(..., description="Issue id", examples=[3])
    issue_key: str = Field(..., description="Human readable key", examples=["WEB-3"])
    project_id: int = Field(..., description="Project id", examples=[1])
    project_name: str = Field(..., description="Project name", examples=["Customer Web Portal"])
    sprint_id: Optional[int] = Field(None, description="Sprint id, null when in backlog", examples=[2])
    sprint_name: Optional[str] = Field(None, description="Sprint name", examples=["Sprint 15"])
    title: str = Field(..., description="Issue title", examples=["Checkout page times out on slow networks"])
    description: Optional[str] = Field(None, description="Issue description", examples=["Checkout takes more than 30 seconds"])
    issue_type: str = Field(..., description="bug, task, story or epic", examples=["bug"])
    status: str = Field(..., description="backlog, todo, in_progress, in_review, done or cancelled", examples=["in_progress"])
    priority: str = Field(..., description="lowest, low, medium, high or urgent", examples=["urgent"])
    story_points: Optional[int] = Field(None, description="Estimate in story points", examples=[5])
    reporter_id: int = Field(..., description="User id of the reporter", examples=[2])
    assignee_id: Optional[int] = Field(None, description="User id of the assignee", examples=[3])
    assignee_name: Optional[str] = Field(None, description="Full name of the assignee", examples=["Sofia Lindqvist"])
    due_date: Optional[str] = Field(None, description="Due date (YYYY-MM-DD)", examples=["2026-03-12"])
    labels: List[str] = Field(..., description="Names of attached labels", examples=[["frontend", "performance"]])
    created_at: str = Field(..., description="Creation timestamp", examples=["2026-03-02 09:00:00"])
    updated_at: str = Field(..., description="Last update timestamp", examples=["2026-03-05 14:02:00"])
    resolved_at: Optional[str] = Field(None, description="When the issue reached done or cancelled", examples=[None])


class IssueCreate(BaseModel):
    project_id: int = Field(..., description="Project id", examples=[1])
    title: str = Field(..., description="Issue title", examples=["Password reset email link expires too early"])
    description: Optional[str] = Field(None, description="Issue description", examples=["Links expire after 5 minutes"])
    issue_type: str = Field("task", description="bug, task, story or epic", examples=["bug"])
    status: str = Field("backlog", description="Initial status", examples=["todo"])
    priority: str = Field("medium", description="lowest, low, medium, high or urgent", examples=["high"])
    story_points: Optional[int] = Field(None, description="Estimate in story points", examples=[3])
    assignee_id: Optional[int] = Field(None, description="User id of the assignee", examples=[4])
    sprint_id: Optional[int] = Field(None, description="Sprint id, omit for backlog", examples=[2])
    due_date: Optional[str] = Field(None, description="Due date (YYYY-MM-DD)", examples=["2026-03-14"])


class IssueUpdate(BaseModel):
    title: Optional[str] = Field(None, description="New title", examples=["Add dark mode toggle to settings"])
    description: Optional[str] = Field(None, description="New description", examples=["Updated details"])
    issue_type: Optional[str] = Field(None, description="bug, task, story or epic", examples=["story"])
    status: Optional[str] = Field(None, description="backlog, todo, in_progress, in_review, done or cancelled", examples=["in_review"])
    priority: Optional[str] = Field(None, description="lowest, low, medium, high or urgent", examples=["high"])
    story_points: Optional[int] = Field(None, description="Estimate in story points", examples=[5])
    assignee_id: Optional[int] = Field(None, description="User id of the new assignee", examples=[5])
    sprint_id: Optional[int] = Field(None, description="Sprint id to move the issue into", examples=[3])
    due_date: Optional[str] = Field(None, description="Due date (YYYY-MM-DD)", examples=["2026-03-20"])


class DeleteResult(BaseModel):
    id: int = Field(..., description="Id of the removed record", examples=[2])
    deleted: bool = Field(..., description="True when the record was removed", examples=[True])


class IssueLabelCreate(BaseModel):
    label_id: int = Field(..., description="Label id (must belong to the issue's project)", examples=[8])


class CommentOut(BaseModel):
    id: int = Field(..., description="Comment id", examples=[2])
    issue_id: int = Field(..., description="Issue id", examples=[3])
    author_id: int = Field(..., description="Author user id", examples=[1])
    author_name: str = Field(..., description="Author full name", examples=["Maya Patel"])
    body: str = Field(..., description="Comment text", examples=["Cannot reproduce on staging, closing soon."])
    created_at: str = Field(..., description="Creation timestamp", examples=["2026-03-04 11:20:00"])
    edited_at: Optional[str] = Field(None, description="Last edit timestamp", examples=[None])


class CommentCreate(BaseModel):
    body: str = Field(..., description="Comment text", examples=["Fix deployed to staging."])


class TimeLogOut(BaseModel):
    id: int = Field(..., description="Time log id", examples=[1])
    issue_id: int = Field(..., description="Issue id", examples=[4])
    user_id: int = Field(..., description="User who did the work", examples=[1])
    user_name: str = Field(..., description="Full name of the user", examples=["Maya Patel"])
    minutes: int = Field(..., description="Minutes worked", examples=[120])
    work_date: str = Field(..., description="Day the work was done (YYYY-MM-DD)", examples=["2026-03-03"])
    note: Optional[str] = Field(None, description="What was done", examples=["Spike on Redis session adapter"])
    created_at: str = Field(..., description="Creation timestamp", examples=["2026-03-03 18:00:00"])


class TimeLogSummary(BaseModel):
    issue_id: int = Field(..., description="Issue id", examples=[4])
    issue_key: str = Field(..., description="Issue key", examples=["WEB-4"])
    total_minutes: int = Field(..., description="Sum of all logged minutes", examples=[450])
    entries: List[TimeLogOut] = Field(..., description="Individual time log entries")


class TimeLogCreate(BaseModel):
    minutes: int = Field(..., description="Minutes worked (e.g. 135 for 2h 15m)", examples=[135])
    work_date: str = Field(..., description="Day the work was done (YYYY-MM-DD)", examples=["2026-03-10"])
    note: Optional[str] = Field(None, description="What was done", examples=["Reworked tab index"])


def issue_out(session, issue):
    project = session.get(Project, issue.project_id)
    sprint = session.get(Sprint, issue.sprint_id) if issue.sprint_id else None
    assignee = session.get(User, issue.assignee_id) if issue.assignee_id else None
    label_names = [row[0] for row in session.query(Label.name).join(IssueLabel, IssueLabel.label_id == Label.id).filter(IssueLabel.issue_id == issue.id).order_by(Label.name).all()]
    return IssueOut(
        id=issue.id, issue_key=issue.issue_key, project_id=issue.project_id, project_name=project.name,
        sprint_id=issue.sprint_id, sprint_name=sprint.name if sprint else None, title=issue.title,
        description=issue.description, issue_type=issue.issue_type, status=issue.status, priority=issue.priority,
        story_points=issue.story_points, reporter_id=issue.reporter_id, assignee_id=issue.assignee_id,
        assignee_name=assignee.full_name if assignee else None, due_date=issue.due_date, labels=label_names,
        created_at=issue.created_at, updated_at=issue.updated_at, resolved_at=issue.resolved_at,
    )


def comment_out(session, comment):
    author = session.get(User, comment.author_id)
    return CommentOut(id=comment.id, issue_id=comment.issue_id, author_id=comment.author_id, author_name=author.full_name,
                      body=comment.body, created_at=comment.created_at, edited_at=comment.edited_at)


def time_log_out(session, log):
    user = session.get(User, log.user_id)
    return TimeLogOut(id=log.id, issue_id=log.issue_id, user_id=log.user_id, user_name=user.full_name, minutes=log.minutes,
                      work_date=log.work_date, note=log.note, created_at=log.created_at)


@app.get("/api/users/me", summary="Get my profile", description="Return the profile of the logged-in user.", tags=["users"], operation_id="get_current_user", response_model=UserOut)
async def get_current_user():
    user_id = 1
    session = SessionLocal()
    user = session.get(User, user_id)
    result = UserOut.model_validate(user)
    session.close()
    return result


@app.get("/api/users", summary="Search users", description="List team members, optionally filtered by name/username/email text and active flag.", tags=["users"], operation_id="list_users", response_model=List[UserOut])
async def list_users(q: Optional[str] = Query(None, description="Text matched against full name, username or email", examples=["Priya"]), is_active: Optional[int] = Query(None, description="1 for active users only, 0 for deactivated", examples=[1])):
    session = SessionLocal()
    query = session.query(User)
    if q:
        pattern = f"%{q}%"
        query = query.filter(or_(User.full_name.ilike(pattern), User.username.ilike(pattern), User.email.ilike(pattern)))
    if is_active is not None:
        query = query.filter(User.is_active == is_active)
    result = [UserOut.model_validate(u) for u in query.order_by(User.full_name).all()]
    session.close()
    return result


@app.get("/api/workspaces", summary="List workspaces", description="List all workspaces with their owner and plan.", tags=["workspaces"], operation_id="list_workspaces", response_model=List[WorkspaceOut])
async def list_workspaces():
    session = SessionLocal()
    result = [WorkspaceOut.model_validate(w) for w in session.query(Workspace).order_by(Workspace.name).all()]
    session.close()
    return result


@app.get("/api/projects", summary="Search projects", description="List projects filtered by workspace, status or name/key text.", tags=["projects"], operation_id="list_projects", response_model=List[ProjectOut])
async def list_projects(q: Optional[str] = Query(None, description="Text matched against project name or key", examples=["Mobile"]), workspace_id: Optional[int] = Query(None, description="Workspace id", examples=[1]), status: Optional[str] = Query(None, description="active or archived", examples=["active"])):
    session = SessionLocal()
    query = session.query(Project)
    if q:
        pattern = f"%{q}%"
        query = query.filter(or_(Project.name.ilike(pattern), Project.project_key.ilike(pattern)))
    if workspace_id is not None:
        query = query.filter(Project.workspace_id == workspace_id)
    if status:
        query = query.filter(Project.status == status)
    result = [ProjectOut.model_validate(p) for p in query.order_by(Project.name).all()]
    session.close()
    return result


@app.get("/api/projects/{project_id}/members", summary="List project members", description="List the members of a project with their project roles.", tags=["projects"], operation_id="list_project_members", response_model=List[MemberOut])
async def list_project_members(project_id: int):
    session = SessionLocal()
    rows = session.query(ProjectMember, User).join(User, User.id == ProjectMember.user_id).filter(ProjectMember.project_id == project_id).order_by(ProjectMember.id).all()
    result = [MemberOut(id=m.id, project_id=m.project_id, user_id=m.user_id, full_name=u.full_name, role=m.role, joined_at=m.joined_at) for m, u in rows]
    session.close()
    return result


@app.post("/api/projects/{project_id}/members", summary="Add project member", description="Add a user to a project with the given project role.", tags=["projects"], operation_id="add_project_member", response_model=MemberOut)
async def add_project_member(project_id: int, payload: MemberCreate):
    session = SessionLocal()
    user = session.get(User, payload.user_id)
    member = ProjectMember(project_id=project_id, user_id=payload.user_id, role=payload.role, joined_at=now_text())
    session.add(member)
    session.commit()
    result = MemberOut(id=member.id, project_id=member.project_id, user_id=member.user_id, full_name=user.full_name, role=member.role, joined_at=member.joined_at)
    session.close()
    return result


@app.get("/api/sprints", summary="List sprints", description="List sprints filtered by project, status or name.", tags=["sprints"], operation_id="list_sprints", response_model=List[SprintOut])
async def list_sprints(project_id: Optional[int] = Query(None, description="Project id", examples=[2]), status: Optional[str] = Query(None, description="planned, active or completed", examples=["active"]), name: Optional[str] = Query(None, description="Text matched against the sprint name", examples=["Sprint 15"])):
    session = SessionLocal()
    query = session.query(Sprint)
    if project_id is not None:
        query = query.filter(Sprint.project_id == project_id)
    if status:
        query = query.filter(Sprint.status == status)
    if name:
        query = query.filter(Sprint.name.ilike(f"%{name}%"))
    result = [SprintOut.model_validate(s) for s in query.order_by(Sprint.project_id, Sprint.start_date).all()]
    session.close()
    return result


@app.post("/api/sprints", summary="Create sprint", description="Create a planned sprint in a project.", tags=["sprints"], operation_id="create_sprint", response_model=SprintOut)
async def create_sprint(payload: SprintCreate):
    session = SessionLocal()
    sprint = Sprint(project_id=payload.project_id, name=payload.name, goal=payload.goal, start_date=payload.start_date, end_date=payload.end_date, status="planned", created_at=now_text())
    session.add(sprint)
    session.commit()
    result = SprintOut.model_validate(sprint)
    session.close()
    return result


@app.post("/api/sprints/{sprint_id}/start", summary="Start sprint", description="Mark a planned sprint as active.", tags=["sprints"], operation_id="start_sprint", response_model=SprintOut)
async def start_sprint(sprint_id: int):
    session = SessionLocal()
    sprint = session.get(Sprint, sprint_id)
    sprint.status = "active"
    session.commit()
    result = SprintOut.model_validate(sprint)
    session.close()
    return result


@app.post("/api/sprints/{sprint_id}/complete", summary="Complete sprint", description="Complete a sprint and move its unfinished issues to another sprint or to the backlog.", tags=["sprints"], operation_id="complete_sprint", response_model=SprintCompleteOut)
async def complete_sprint(sprint_id: int, move_open_issues_to_sprint_id: Optional[int] = Query(None, description="Sprint id that receives unfinished issues; omit to send them to the backlog", examples=[3])):
    session = SessionLocal()
    sprint = session.get(Sprint, sprint_id)
    stamp = now_text()
    open_issues = session.query(Issue).filter(Issue.sprint_id == sprint_id, Issue.status.notin_(["done", "cancelled"])).order_by(Issue.id).all()
    moved = []
    for issue in open_issues:
        issue.sprint_id = move_open_issues_to_sprint_id
        issue.updated_at = stamp
        moved.append(issue.issue_key)
    sprint.status = "completed"
    sprint.completed_at = stamp
    session.commit()
    result = SprintCompleteOut(sprint=SprintOut.model_validate(sprint), moved_issue_keys=moved, moved_to_sprint_id=move_open_issues_to_sprint_id)
    session.close()
    return result


@app.get("/api/issues", summary="Search issues", description="Search issues by title/key text with filters for project, sprint, status, priority, type, assignee and label.", tags=["issues"], operation_id="search_issues", response_model=List[IssueOut])
async def search_issues(q: Optional[str] = Query(None, description="Text matched against title or issue key", examples=["dark mode"]), project_id: Optional[int] = Query(None, description="Project id", examples=[2]), sprint_id: Optional[int] = Query(None, description="Sprint id", examples=[5]), status: Optional[str] = Query(None, description="backlog, todo, in_progress, in_review, done or cancelled", examples=["in_progress"]), priority: Optional[str] = Query(None, description="lowest, low, medium, high or urgent", examples=["high"]), issue_type: Optional[str] = Query(None, description="bug, task, story or epic", examples=["bug"]), assignee_id: Optional[int] = Query(None, description="Assignee user id", examples=[1]), label_id: Optional[int] = Query(None, description="Only issues carrying this label", examples=[3])):
    session = SessionLocal()
    query = session.query(Issue)
    if q:
        pattern = f"%{q}%"
        query = query.filter(or_(Issue.title.ilike(pattern), Issue.issue_key.ilike(pattern)))
    if project_id is not None:
        query = query.filter(Issue.project_id == project_id)
    if sprint_id is not None:
        query = query.filter(Issue.sprint_id == sprint_id)
    if status:
        query = query.filter(Issue.status == status)
    if priority:
        query = query.filter(Issue.priority == priority)
    if issue_type:
        query = query.filter(Issue.issue_type == issue_type)
    if assignee_id is not None:
        query = query.filter(Issue.assignee_id == assignee_id)
    if label_id is not None:
        query = query.join(IssueLabel, IssueLabel.issue_id == Issue.id).filter(IssueLabel.label_id == label_id)
    result = [issue_out(session, i) for i in query.order_by(Issue.id).all()]
    session.close()
    return result


@app.get("/api/issues/{issue_id}", summary="Get issue", description="Return one issue by id with its labels, sprint and assignee name.", tags=["issues"], operation_id="get_issue", response_model=IssueOut)
async def get_issue(issue_id: int):
    session = SessionLocal()
    issue = session.get(Issue, issue_id)
    result = issue_out(session, issue)
    session.close()
    return result


@app.post("/api/issues", summary="Create issue", description="Create an issue in a project; the key is generated from the project key and I am the reporter.", tags=["issues"], operation_id="create_issue", response_model=IssueOut)
async def create_issue(payload: IssueCreate):
    user_id = 1
    session = SessionLocal()
    project = session.get(Project, payload.project_id)
    number = project.next_issue_number
    project.next_issue_number = number + 1
    stamp = now_text()
    issue = Issue(project_id=project.id, sprint_id=payload.sprint_id, issue_key=f"{project.project_key}-{number}", title=payload.title, description=payload.description, issue_type=payload.issue_type, status=payload.status, priority=payload.priority, story_points=payload.story_points, reporter_id=user_id, assignee_id=payload.assignee_id, due_date=payload.due_date, created_at=stamp, updated_at=stamp)
    session.add(issue)
    session.commit()
    result = issue_out(session, issue)
    session.close()
    return result


@app.patch("/api/issues/{issue_id}", summary="Update issue", description="Change status, priority, assignee, sprint, estimate, due date or text of an issue; omitted fields stay unchanged.", tags=["issues"], operation_id="update_issue", response_model=IssueOut)
async def update_issue(issue_id: int, payload: IssueUpdate):
    session = SessionLocal()
    issue = session.get(Issue, issue_id)
    changes = payload.model_dump(exclude_unset=True)
    for key, value in changes.items():
        setattr(issue, key, value)
    stamp = now_text()
    if "status" in changes:
        issue.resolved_at = stamp if changes["status"] in ("done", "cancelled") else None
    issue.updated_at = stamp
    session.commit()
    result = issue_out(session, issue)
    session.close()
    return result


@app.delete("/api/issues/{issue_id}", summary="Delete issue", description="Permanently delete an issue with its labels, comments and time logs.", tags=["issues"], operation_id="delete_issue", response_model=DeleteResult)
async def delete_issue(issue_id: int):
    session = SessionLocal()
    issue = session.get(Issue, issue_id)
    session.query(IssueLabel).filter(IssueLabel.issue_id == issue_id).delete()
    session.query(Comment).filter(Comment.issue_id == issue_id).delete()
    session.query(TimeLog).filter(TimeLog.issue_id == issue_id).delete()
    session.delete(issue)
    session.commit()
    session.close()
    return DeleteResult(id=issue_id, deleted=True)


@app.get("/api/labels", summary="List labels", description="List labels, optionally for one project or matching a name.", tags=["labels"], operation_id="list_labels", response_model=List[LabelOut])
async def list_labels(project_id: Optional[int] = Query(None, description="Project id", examples=[2]), name: Optional[str] = Query(None, description="Text matched against the label name", examples=["performance"])):
    session = SessionLocal()
    query = session.query(Label)
    if project_id is not None:
        query = query.filter(Label.project_id == project_id)
    if name:
        query = query.filter(Label.name.ilike(f"%{name}%"))
    result = [LabelOut.model_validate(l) for l in query.order_by(Label.project_id, Label.name).all()]
    session.close()
    return result


@app.post("/api/issues/{issue_id}/labels", summary="Add label to issue", description="Attach an existing label to an issue.", tags=["labels"], operation_id="add_label_to_issue", response_model=IssueOut)
async def add_label_to_issue(issue_id: int, payload: IssueLabelCreate):
    session = SessionLocal()
    issue = session.get(Issue, issue_id)
    session.add(IssueLabel(issue_id=issue.id, label_id=payload.label_id, added_at=now_text()))
    issue.updated_at = now_text()
    session.commit()
    result = issue_out(session, issue)
    session.close()
    return result


@app.get("/api/issues/{issue_id}/comments", summary="List issue comments", description="List the comments of an issue, oldest first.", tags=["comments"], operation_id="list_issue_comments", response_model=List[CommentOut])
async def list_issue_comments(issue_id: int):
    session = SessionLocal()
    rows = session.query(Comment).filter(Comment.issue_id == issue_id).order_by(Comment.created_at, Comment.id).all()
    result = [comment_out(session, c) for c in rows]
    session.close()
    return result


@app.post("/api/issues/{issue_id}/comments", summary="Add comment", description="Post a comment on an issue as the logged-in user.", tags=["comments"], operation_id="add_comment", response_model=CommentOut)
async def add_comment(issue_id: int, payload: CommentCreate):
    user_id = 1
    session = SessionLocal()
    issue = session.get(Issue, issue_id)
    comment = Comment(issue_id=issue.id, author_id=user_id, body=payload.body, created_at=now_text())
    session.add(comment)
    session.commit()
    result = comment_out(session, comment)
    session.close()
    return result


@app.delete("/api/comments/{comment_id}", summary="Delete comment", description="Delete a comment by id.", tags=["comments"], operation_id="delete_comment", response_model=DeleteResult)
async def delete_comment(comment_id: int):
    session = SessionLocal()
    comment = session.get(Comment, comment_id)
    session.delete(comment)
    session.commit()
    session.close()
    return DeleteResult(id=comment_id, deleted=True)


@app.get("/api/issues/{issue_id}/time-logs", summary="List time logs of an issue", description="List all time log entries of an issue with the total minutes.", tags=["time_logs"], operation_id="list_time_logs", response_model=TimeLogSummary)
async def list_time_logs(issue_id: int):
    session = SessionLocal()
    issue = session.get(Issue, issue_id)
    rows = session.query(TimeLog).filter(TimeLog.issue_id == issue_id).order_by(TimeLog.work_date, TimeLog.id).all()
    total = session.query(func.coalesce(func.sum(TimeLog.minutes), 0)).filter(TimeLog.issue_id == issue_id).scalar()
    result = TimeLogSummary(issue_id=issue.id, issue_key=issue.issue_key, total_minutes=total, entries=[time_log_out(session, r) for r in rows])
    session.close()
    return result


@app.post("/api/issues/{issue_id}/time-logs", summary="Log time", description="Log minutes worked on an issue by the logged-in user.", tags=["time_logs"], operation_id="log_time", response_model=TimeLogOut)
async def log_time(issue_id: int, payload: TimeLogCreate):
    user_id = 1
    session = SessionLocal()
    issue = session.get(Issue, issue_id)
    log = TimeLog(issue_id=issue.id, user_id=user_id, minutes=payload.minutes, work_date=payload.work_date, note=payload.note, created_at=now_text())
    session.add(log)
    session.commit()
    result = time_log_out(session, log)
    session.close()
    return result


if __name__ == "__main__":
    import uvicorn
    host = os.getenv("HOST", "127.0.0.1")
    port = int(os.getenv("PORT", "8000"))
    uvicorn.run(app, host=host, port=port)
