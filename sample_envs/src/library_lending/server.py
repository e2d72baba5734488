import os
from datetime import datetime, timedelta
from typing import List, Optional

from fastapi import FastAPI, Query
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Boolean, Column, Float, ForeignKey, Integer, String, Text, create_engine, func
from sqlalchemy.orm import declarative_base, sessionmaker

DATABASE_PATH = os.environ.get("DATABASE_PATH", "sqlite:///library_lending.db")
engine = create_engine(DATABASE_PATH, connect_args={"check_same_thread": False})
SessionLocal = sessionmaker(bind=engine, autocommit=False, autoflush=False)
Base = declarative_base()


class Branch(Base):
    __tablename__ = "branches"
    id = Column(Integer, primary_key=True)
    name = Column(String, nullable=False, unique=True)
    address = Column(String, nullable=False)
    phone = Column(String)
    email = Column(String)
    opening_hours = Column(String)
    created_at = Column(String, nullable=False)


class Member(Base):
    __tablename__ = "members"
    id = Column(Integer, primary_key=True)
    card_number = Column(String, nullable=False, unique=True)
    first_name = Column(String, nullable=False)
    last_name = Column(String, nullable=False)
    email = Column(String, nullable=False, unique=True)
    phone = Column(String)
    home_branch_id = Column(Integer, ForeignKey("branches.id"), nullable=False)
    membership_type = Column(String, nullable=False, default="standard")
    status = Column(String, nullable=False, default="active")
    max_loans = Column(Integer, nullable=False, default=10)
    joined_at = Column(String, nullable=False)


class Author(Base):
    __tablename__ = "authors"
    id = Column(Integer, primary_key=True)
    name = Column(String, nullable=False)
    birth_year = Column(Integer)
    nationality = Column(String)


class Title(Base):
    __tablename__ = "titles"
    id = Column(Integer, primary_key=True)
    title = Column(String, nullable=False)
    author_id = Column(Integer, ForeignKey("authors.id"), nullable=False)
    isbn = Column(String, unique=True)
    publication_year = Column(Integer)
    genre = Column(String)
    format = Column(String, nullable=False)
    language = Column(String, nullable=False, default="English")
    page_count = Column(Integer)
    description = Column(Text)


class Copy(Base):
    __tablename__ = "copies"
    id = Column(Integer, primary_key=True)
    title_id = Column(Integer, ForeignKey("titles.id"), nullable=False)
    branch_id = Column(Integer, ForeignKey("branches.id"), nullable=False)
    barcode = Column(String, nullable=False, unique=True)
    status = Column(String, nullable=False, default="available")
    shelf_location = Column(String)
    acquired_date = Column(String)


class Loan(Base):
    __tablename__ = "loans"
    id = Column(Integer, primary_key=True)
    copy_id = Column(Integer, ForeignKey("copies.id"), nullable=False)
    member_id = Column(Integer, ForeignKey("members.id"), nullable=False)
    checkout_date = Column(String, nullable=False)
    due_date = Column(String, nullable=False)
    returned_date = Column(String)
    renewal_count = Column(Integer, nullable=False, default=0)
    status = Column(String, nullable=False, default="active")


class Hold(Base):
    __tablename__ = "holds"
    id = Column(Integer, primary_key=True)
    title_id = Column(Integer, ForeignKey("titles.id"), nullable=False)
    member_id = Column(Integer, ForeignKey("members.id"), nullable=False)
    pickup_branch_id = Column(Integer, ForeignKey("branches.id"), nullable=False)
    placed_at = Column(String, nullable=False)
    status = Column(String, nullable=False, default="waiting")
    queue_position = Column(Integer)
    expires_at = Column(String)
    notes = Column(Text)


class Fine(Base):
    __tablename__ = "fines"
    id = Column(Integer, primary_key=True)
    member_id = Column(Integer, ForeignKey("members.id"), nullable=False)
    loan_id = Column(Integer, ForeignKey("loans.id"))
    amount = Column(Float, nullable=False)
    reason = Column(String, nullable=False)
    description = Column(Text)
    status = Column(String, nullable=False, default="unpaid")
    issued_at = Column(String, nullable=False)
    paid_at = Column(String)


class FinePayment(Base):
    __tablename__ = "fine_payments"
    id = Column(Integer, primary_key=True)
    fine_id = Column(Integer, ForeignKey("fines.id"), nullable=False)
    member_id = Column(Integer, ForeignKey("members.id"), nullable=False)
    amount = Column(Float, nullable=False)
    method = Column(String, nullable=False)
    paid_at = Column(String, nullable=False)


class ReadingList(Base):
    __tablename__ = "reading_lists"
    id = Column(Integer, primary_key=True)
    member_id = Column(Integer, ForeignKey("members.id"), nullable=False)
    name = Column(String, nullable=False)
    description = Column(Text)
    is_public = Column(Boolean, nullable=False, default=False)
    created_at = Column(String, nullable=False)


class ReadingListItem(Base):
    __tablename__ = "reading_list_items"
    id = Column(Integer, primary_key=True)
    reading_list_id = Column(Integer, ForeignKey("reading_lists.id"), nullable=False)
    title_id = Column(Integer, ForeignKey("titles.id"), nullable=False)
    note = Column(Text)
    added_at = Column(String, nullable=False)


class Event(Base):
    __tablename__ = "events"
    id = Column(Integer, primary_key=True)
    branch_id = Column(Integer, ForeignKey("branches.id"), nullable=False)
    title = Column(String, nullable=False)
    description = Column(Text)
    event_type = Column(String, nullable=False)
    start_time = Column(String, nullable=False)
    end_time = Column(String, nullable=False)
    capacity = Column(Integer, nullable=False)
    age_group = Column(String, nullable=False, default="all")


class EventRegistration(Base):
    __tablename__ = "event_registrations"
    id = Column(Integer, primary_key=True)
    event_id = Column(Integer, ForeignKey("events.id"), nullable=False)
    member_id = Column(Integer, ForeignKey("members.id"), nullable=False)
    num_attendees = Column(Integer, nullable=False, default=1)
    status = Column(String, nullable=False, default="registered")
    registered_at = Column(String, nullable=False)


Base.metadata.create_all(engine)

app = FastAPI(title="Maple Library Lending API", version="1.0.0")


class BranchOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Branch ID", examples=[2])
    name: str = Field(..., description="Branch name", examples=["Riverside Branch"])
    address: str = Field(..., description="Street address", examples=["42 River Road, Mapleton"])
    phone: Optional[str] = Field(None, description="Phone number", examples=["555-0142"])
    email: Optional[str] = Field(None, description="Contact email", examples=["riverside@maplelibrary.org"])
    opening_hours: Optional[str] = Field(None, description="Opening hours", examples=["Tue-Sat 10:00-18:00"])


class BranchListOut(BaseModel):
    branches: List[BranchOut] = Field(..., description="Matching branches")
    total: int = Field(..., description="Number of branches returned", examples=[5])


class TitleOut(BaseModel):
    id: int = Field(..., description="Title ID", examples=[1])
    title: str = Field(..., description="Title", examples=["The Silent Orchard"])
    author_id: int = Field(..., description="Author ID", examples=[1])
    author_name: str = Field(..., description="Author name", examples=["Helena Marsh"])
    isbn: Optional[str] = Field(None, description="ISBN", examples=["9780000000011"])
    publication_year: Optional[int] = Field(None, description="Publication year", examples=[2021])
    genre: Optional[str] = Field(None, description="Genre", examples=["Mystery"])
    format: str = Field(..., description="Format: print, large_print, audiobook, ebook or dvd", examples=["print"])
    language: str = Field(..., description="Language", examples=["English"])
    page_count: Optional[int] = Field(None, description="Number of pages", examples=[352])
    description: Optional[str] = Field(None, description="Short description", examples=["A village orchard hides a decades-old disappearance."])


class TitleListOut(BaseModel):
    titles: List[TitleOut] = Field(..., description="Matching catalog titles")
    total: int = Field(..., description="Number of titles returned", examples=[2])


class CopyAvailabilityOut(BaseModel):
    copy_id: int = Field(..., description="Copy ID", examples=[2])
    barcode: str = Field(..., description="Copy barcode", examples=["MPL-C-0002"])
    branch_id: int = Field(..., description="Branch holding the copy", examples=[2])
    branch_name: str = Field(..., description="Branch name", examples=["Riverside Branch"])
    status: str = Field(..., description="Copy status", examples=["available"])
    shelf_location: Optional[str] = Field(None, description="Shelf location", examples=["FIC MAR"])


class TitleAvailabilityOut(BaseModel):
    title_id: int = Field(..., description="Title ID", examples=[1])
    title: str = Field(..., description="Title", examples=["The Silent Orchard"])
    format: str = Field(..., description="Format", examples=["print"])
    total_copies: int = Field(..., description="Total copies in the system", examples=[3])
    available_copies: int = Field(..., description="Copies currently available", examples=[1])
    waiting_holds: int = Field(..., description="Number of waiting holds on the title", examples=[0])
    copies: List[CopyAvailabilityOut] = Field(..., description="Copies per branch")


class MemberOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Member ID", examples=[1])
    card_number: str = Field(..., description="Library card number", examples=["MPL-2000417"])
    first_name: str = Field(..., description="First name", examples=["Jordan"])
    last_name: str = Field(..., description="Last name", examples=["Ellis"])
    email: str = Field(..., description="Email", examples=["jordan.ellis@example.com"])
    phone: Optional[str] = Field(None, description="Phone", examples=["555-2417"])
    home_branch_id: int = Field(..., description="Home branch ID", examples=[1])
    membership_type: str = Field(..., description="Membership type", examples=["standard"])
    status: str = Field(..., description="Membership status", examples=["active"])
    max_loans: int = Field(..., description="Maximum simultaneous loans", examples=[10])
    joined_at: str = Field(..., description="Join timestamp", examples=["2019-04-12 15:20:00"])


class MemberUpdate(BaseModel):
    email: Optional[str] = Field(None, description="New email address", examples=["jordan.ellis@newmail.com"])
    phone: Optional[str] = Field(None, description="New phone number", examples=["555-0199"])
    home_branch_id: Optional[int] = Field(None, description="New home branch ID", examples=[3])


class LoanOut(BaseModel):
    id: int = Field(..., description="Loan ID", examples=[1])
    copy_id: int = Field(..., description="Copy ID", examples=[1])
    barcode: str = Field(..., description="Copy barcode", examples=["MPL-C-0001"])
    title_id: int = Field(..., description="Title ID", examples=[1])
    title: str = Field(..., description="Title", examples=["The Silent Orchard"])
    format: str = Field(..., description="Format", examples=["print"])
    branch_name: str = Field(..., description="Branch that owns the copy", examples=["Downtown Central Library"])
    checkout_date: str = Field(..., description="Checkout date", examples=["2026-02-24"])
    due_date: str = Field(..., description="Due date", examples=["2026-03-17"])
    returned_date: Optional[str] = Field(None, description="Return date", examples=[None])
    renewal_count: int = Field(..., description="Number of renewals", examples=[0])
    status: str = Field(..., description="Loan status", examples=["active"])


class LoanListOut(BaseModel):
    loans: List[LoanOut] = Field(..., description="The member's loans")
    total: int = Field(..., description="Number of loans returned", examples=[2])


class HoldOut(BaseModel):
    id: int = Field(..., description="Hold ID", examples=[3])
    title_id: int = Field(..., description="Title ID", examples=[9])
    title: str = Field(..., description="Title", examples=["Paper Moons"])
    format: str = Field(..., description="Format", examples=["print"])
    pickup_branch_id: int = Field(..., description="Pickup branch ID", examples=[2])
    pickup_branch_name: str = Field(..., description="Pickup branch name", examples=["Riverside Branch"])
    placed_at: str = Field(..., description="When the hold was placed", examples=["2026-03-04 20:05:00"])
    status: str = Field(..., description="Hold status", examples=["waiting"])
    queue_position: Optional[int] = Field(None, description="Position in the title's hold queue", examples=[1])
    expires_at: Optional[str] = Field(None, description="Pickup deadline once ready", examples=[None])
    notes: Optional[str] = Field(None, description="Member notes", examples=["Any copy is fine"])


class HoldListOut(BaseModel):
    holds: List[HoldOut] = Field(..., description="The member's holds")
    total: int = Field(..., description="Number of holds returned", examples=[2])


class HoldCreate(BaseModel):
    title_id: int = Field(..., description="Title ID to reserve", examples=[6])
    pickup_branch_id: int = Field(..., description="Branch where the item will be picked up", examples=[2])
    notes: Optional[str] = Field(None, description="Optional note for staff", examples=["Please call when ready"])


class HoldUpdate(BaseModel):
    pickup_branch_id: Optional[int] = Field(None, description="New pickup branch ID", examples=[3])
    notes: Optional[str] = Field(None, description="New note for staff", examples=["Any copy is fine"])


class FineOut(BaseModel):
    id: int = Field(..., description="Fine ID", examples=[1])
    loan_id: Optional[int] = Field(None, description="Related loan ID", examples=[4])
    title: Optional[str] = Field(None, description="Title of the related loan", examples=["Salt and Cedar"])
    amount: float = Field(..., description="Fine amount in dollars", examples=[2.5])
    reason: str = Field(..., description="Reason: overdue, damage, lost_item or other", examples=["overdue"])
    description: Optional[str] = Field(None, description="Details", examples=["Returned 10 days late"])
    status: str = Field(..., description="Status: unpaid, paid or waived", examples=["unpaid"])
    issued_at: str = Field(..., description="Issue timestamp", examples=["2026-02-05 12:00:00"])
    paid_at: Optional[str] = Field(None, description="Payment timestamp", examples=[None])


class FineListOut(BaseModel):
    fines: List[FineOut] = Field(..., description="The member's fines")
    total_unpaid: float = Field(..., description="Sum of all unpaid fines of the member", examples=[7.75])


class FinePaymentCreate(BaseModel):
    method: str = Field(..., description="Payment method: card, cash or account_credit", examples=["card"])


class FinePaymentOut(BaseModel):
    payment_id: int = Field(..., description="Payment ID", examples=[3])
    fine_id: int = Field(..., description="Fine ID", examples=[1])
    amount: float = Field(..., description="Amount paid", examples=[2.5])
    method: str = Field(..., description="Payment method", examples=["card"])
    paid_at: str = Field(..., description="Payment timestamp", examples=["2026-03-10 10:00:00"])
    fine_status: str = Field(..., description="Fine status after payment", examples=["paid"])


class ReadingListItemOut(BaseModel):
    id: int = Field(..., description="Item ID", examples=[1])
    title_id: int = Field(..., description="Title ID", examples=[13])
    title: str = Field(..., description="Title", examples=["Summer of Lost Keys"])
    format: str = Field(..., description="Format", examples=["print"])
    author_name: str = Field(..., description="Author", examples=["Helena Marsh"])
    note: Optional[str] = Field(None, description="Note", examples=["Loved the seaside setting"])
    added_at: str = Field(..., description="When the title was added", examples=["2025-11-15 21:05:00"])


class ReadingListOut(BaseModel):
    id: int = Field(..., description="Reading list ID", examples=[1])
    name: str = Field(..., description="List name", examples=["Cozy Mysteries"])
    description: Optional[str] = Field(None, description="List description", examples=["Comfort reads for rainy weekends"])
    is_public: bool = Field(..., description="Whether the list is public", examples=[True])
    created_at: str = Field(..., description="Creation timestamp", examples=["2025-11-15 21:00:00"])
    item_count: int = Field(..., description="Number of titles in the list", examples=[2])


class ReadingListsOut(BaseModel):
    reading_lists: List[ReadingListOut] = Field(..., description="The member's reading lists")
    total: int = Field(..., description="Number of lists", examples=[2])


class ReadingListDetailOut(BaseModel):
    id: int = Field(..., description="Reading list ID", examples=[1])
    name: str = Field(..., description="List name", examples=["Cozy Mysteries"])
    description: Optional[str] = Field(None, description="List description", examples=["Comfort reads for rainy weekends"])
    is_public: bool = Field(..., description="Whether the list is public", examples=[True])
    created_at: str = Field(..., description="Creation timestamp", examples=["2025-11-15 21:00:00"])
    items: List[ReadingListItemOut] = Field(..., description="Titles in the list")


class ReadingListCreate(BaseModel):
    name: str = Field(..., description="Name of the new list", examples=["Summer Mysteries 2026"])
    description: Optional[str] = Field(None, description="Optional description", examples=["Beach reads"])
    is_public: bool = Field(False, description="Make the list public", examples=[False])


class ReadingListItemCreate(BaseModel):
    title_id: int = Field(..., description="Title ID to add", examples=[1])
    note: Optional[str] = Field(None, description="Optional note", examples=["Recommended by a friend"])


class DeleteResult(BaseModel):
    success: bool = Field(..., description="Whether the deletion happened", examples=[True])
    message: str = Field(..., description="Result message", examples=["Item 3 removed from reading list 2"])


class EventOut(BaseModel):
    id: int = Field(..., description="Event ID", examples=[1])
    branch_id: int = Field(..., description="Hosting branch ID", examples=[2])
    branch_name: str = Field(..., description="Hosting branch name", examples=["Riverside Branch"])
    title: str = Field(..., description="Event title", examples=["Intro to Watercolor Painting"])
    description: Optional[str] = Field(None, description="Event description", examples=["Beginner watercolor techniques; materials provided."])
    event_type: str = Field(..., description="Event type", examples=["workshop"])
    start_time: str = Field(..., description="Start date and time", examples=["2026-04-18 14:00:00"])
    end_time: str = Field(..., description="End date and time", examples=["2026-04-18 16:00:00"])
    capacity: int = Field(..., description="Maximum attendees", examples=[15])
    age_group: str = Field(..., description="Target age group", examples=["adults"])
    registered_attendees: int = Field(..., description="Attendees currently registered", examples=[1])
    spots_remaining: int = Field(..., description="Remaining capacity", examples=[14])


class EventListOut(BaseModel):
    events: List[EventOut] = Field(..., description="Matching events")
    total: int = Field(..., description="Number of events returned", examples=[2])


class EventRegistrationCreate(BaseModel):
    num_attendees: int = Field(1, description="Number of attendees including the member", examples=[3])


class EventRegistrationOut(BaseModel):
    id: int = Field(..., description="Registration ID", examples=[1])
    event_id: int = Field(..., description="Event ID", examples=[6])
    event_title: str = Field(..., description="Event title", examples=["Author Talk: Helena Marsh"])
    branch_name: str = Field(..., description="Hosting branch", examples=["Northgate Branch"])
    start_time: str = Field(..., description="Event start", examples=["2026-03-28 18:00:00"])
    num_attendees: int = Field(..., description="Number of attendees", examples=[1])
    status: str = Field(..., description="Registration status", examples=["registered"])
    registered_at: str = Field(..., description="Registration timestamp", examples=["2026-03-01 12:00:00"])


class EventRegistrationListOut(BaseModel):
    registrations: List[EventRegistrationOut] = Field(..., description="The member's event registrations")
    total: int = Field(..., description="Number of registrations", examples=[2])


def _now():
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S")


def _title_out(session, t):
    author = session.get(Author, t.author_id)
    return TitleOut(id=t.id, title=t.title, author_id=t.author_id, author_name=author.name, isbn=t.isbn,
                    publication_year=t.publication_year, genre=t.genre, format=t.format, language=t.language,
                    page_count=t.page_count, description=t.description)


def _loan_out(session, loan):
    copy = session.get(Copy, loan.copy_id)
    title = session.get(Title, copy.title_id)
    branch = session.get(Branch, copy.branch_id)
    return LoanOut(id=loan.id, copy_id=copy.id, barcode=copy.barcode, title_id=title.id, title=title.title,
                   format=title.format, branch_name=branch.name, checkout_date=loan.checkout_date,
                   due_date=loan.due_date, returned_date=loan.returned_date, renewal_count=loan.renewal_count,
                   status=loan.status)


def _hold_out(session, hold):
    title = session.get(Title, hold.title_id)
    branch = session.get(Branch, hold.pickup_branch_id)
    return HoldOut(id=hold.id, title_id=title.id, title=title.title, format=title.format,
                   pickup_branch_id=branch.id, pickup_branch_name=branch.name, placed_at=hold.placed_at,
                   status=hold.status, queue_position=hold.queue_position, expires_at=hold.expires_at,
                   notes=hold.notes)


def _fine_out(session, fine):
    title_name = None
    if fine.loan_id is not None:
        loan = session.get(Loan, fine.loan_id)
        copy = session.get(Copy, loan.copy_id)
        title_name = session.get(Title, copy.title_id).title
    return FineOut(id=fine.id, loan_id=fine.loan_id, title=title_name, amount=fine.amount, reason=fine.reason,
                   description=fine.description, status=fine.status, issued_at=fine.issued_at, paid_at=fine.paid_at)


def _event_out(session, event):
    branch = session.get(Branch, event.branch_id)
    registered = session.query(func.coalesce(func.sum(EventRegistration.num_attendees), 0)).filter(
        EventRegistration.event_id == event.id, EventRegistration.status == "registered").scalar()
    return EventOut(id=event.id, branch_id=branch.id, branch_name=branch.name, title=event.title,
                    description=event.description, event_type=event.event_type, start_time=event.start_time,
                    end_time=event.end_time, capacity=event.capacity, age_group=event.age_group,
                    registered_attendees=registered, spots_remaining=event.capacity - registered)


def _registration_out(session, reg):
    event = session.get(Event, reg.event_id)
    branch = session.get(Branch, event.branch_id)
    return EventRegistrationOut(id=reg.id, event_id=event.id, event_title=event.title, branch_name=branch.name,
                                start_time=event.start_time, num_attendees=reg.num_attendees, status=reg.status,
                                registered_at=reg.registered_at)


def _reading_list_detail(session, rl):
    items = []
    for item in session.query(ReadingListItem).filter(ReadingListItem.reading_list_id == rl.id).order_by(ReadingListItem.id).all():
        title = session.get(Title, item.title_id)
        author = session.get(Author, title.author_id)
        items.append(ReadingListItemOut(id=item.id, title_id=title.id, title=title.title, format=title.format,
                                        author_name=author.name, note=item.note, added_at=item.added_at))
    return ReadingListDetailOut(id=rl.id, name=rl.name, description=rl.description, is_public=bool(rl.is_public),
                                created_at=rl.created_at, items=items)


@app.get("/api/branches", summary="List library branches", description="List all library branches, optionally filtered by a name fragment.", tags=["branches"], operation_id="list_branches", response_model=BranchListOut)
async def list_branches(q: Optional[str] = Query(None, description="Case-insensitive fragment of the branch name", examples=["Riverside"])):
    session = SessionLocal()
    query = session.query(Branch)
    if q:
        query = query.filter(Branch.name.ilike(f"%{q}%"))
    branches = [BranchOut.model_validate(b) for b in query.order_by(Branch.id).all()]
    session.close()
    return BranchListOut(branches=branches, total=len(branches))


@app.get("/api/titles", summary="Search the catalog", description="Search catalog titles by title text, author name, genre and format.", tags=["catalog"], operation_id="search_titles", response_model=TitleListOut)
async def search_titles(
    q: Optional[str] = Query(None, description="Fragment of the title", examples=["The Silent Orchard"]),
    author: Optional[str] = Query(None, description="Fragment of the author name", examples=["Helena Marsh"]),
    genre: Optional[str] = Query(None, description="Genre", examples=["Mystery"]),
    format: Optional[str] = Query(None, description="Format: print, large_print, audiobook, ebook or dvd", examples=["print"]),
    limit: int = Query(50, description="Maximum number of results", examples=[20]),
):
    session = SessionLocal()
    query = session.query(Title).join(Author, Author.id == Title.author_id)
    if q:
        query = query.filter(Title.title.ilike(f"%{q}%"))
    if author:
        query = query.filter(Author.name.ilike(f"%{author}%"))
    if genre:
        query = query.filter(Title.genre.ilike(genre))
    if format:
        query = query.filter(Title.format == format)
    titles = [_title_out(session, t) for t in query.order_by(Title.title, Title.id).limit(limit).all()]
    session.close()
    return TitleListOut(titles=titles, total=len(titles))


@app.get("/api/titles/{title_id}/availability", summary="Get copy availability of a title", description="Show every copy of a title with its branch and status, plus available copy and waiting hold counts.", tags=["catalog"], operation_id="get_title_availability", response_model=TitleAvailabilityOut)
async def get_title_availability(title_id: int):
    session = SessionLocal()
    title = session.get(Title, title_id)
    copies = []
    for c in session.query(Copy).filter(Copy.title_id == title_id).order_by(Copy.branch_id, Copy.id).all():
        branch = session.get(Branch, c.branch_id)
        copies.append(CopyAvailabilityOut(copy_id=c.id, barcode=c.barcode, branch_id=branch.id, branch_name=branch.name,
                                          status=c.status, shelf_location=c.shelf_location))
    waiting = session.query(Hold).filter(Hold.title_id == title_id, Hold.status == "waiting").count()
    result = TitleAvailabilityOut(title_id=title.id, title=title.title, format=title.format, total_copies=len(copies),
                                  available_copies=len([c for c in copies if c.status == "available"]),
                                  waiting_holds=waiting, copies=copies)
    session.close()
    return result


@app.get("/api/members/me", summary="Get my member profile", description="Return the profile of the logged-in library member.", tags=["members"], operation_id="get_my_profile", response_model=MemberOut)
async def get_my_profile():
    user_id = 1
    session = SessionLocal()
    member = MemberOut.model_validate(session.get(Member, user_id))
    session.close()
    return member


@app.patch("/api/members/me", summary="Update my member profile", description="Update the email, phone number or home branch of the logged-in member.", tags=["members"], operation_id="update_my_profile", response_model=MemberOut)
async def update_my_profile(body: MemberUpdate):
    user_id = 1
    session = SessionLocal()
    member = session.get(Member, user_id)
    if body.email is not None:
        member.email = body.email
    if body.phone is not None:
        member.phone = body.phone
    if body.home_branch_id is not None:
        member.home_branch_id = body.home_branch_id
    session.commit()
    result = MemberOut.model_validate(member)
    session.close()
    return result


@app.get("/api/loans", summary="List my loans", description="List the logged-in member's loans with title, copy and due date, optionally filtered by status.", tags=["loans"], operation_id="list_my_loans", response_model=LoanListOut)
async def list_my_loans(status: Optional[str] = Query(None, description="Loan status: active, returned, overdue or lost", examples=["active"])):
    user_id = 1
    session = SessionLocal()
    query = session.query(Loan).filter(Loan.member_id == user_id)
    if status:
        query = query.filter(Loan.status == status)
    loans = [_loan_out(session, loan) for loan in query.order_by(Loan.checkout_date.desc(), Loan.id.desc()).all()]
    session.close()
    return LoanListOut(loans=loans, total=len(loans))


@app.post("/api/loans/{loan_id}/renew", summary="Renew a loan", description="Renew one of my loans, extending its due date by 14 days and counting the renewal.", tags=["loans"], operation_id="renew_loan", response_model=LoanOut)
async def renew_loan(loan_id: int):
    user_id = 1
    session = SessionLocal()
    loan = session.query(Loan).filter(Loan.id == loan_id, Loan.member_id == user_id).first()
    loan.due_date = (datetime.strptime(loan.due_date, "%Y-%m-%d") + timedelta(days=14)).strftime("%Y-%m-%d")
    loan.renewal_count = loan.renewal_count + 1
    session.commit()
    result = _loan_out(session, loan)
    session.close()
    return result


@app.get("/api/holds", summary="List my holds", description="List the logged-in member's holds (reservations), optionally filtered by status.", tags=["holds"], operation_id="list_my_holds", response_model=HoldListOut)
async def list_my_holds(status: Optional[str] = Query(None, description="Hold status: waiting, ready, fulfilled, cancelled or expired", examples=["waiting"])):
    user_id = 1
    session = SessionLocal()
    query = session.query(Hold).filter(Hold.member_id == user_id)
    if status:
        query = query.filter(Hold.status == status)
    holds = [_hold_out(session, h) for h in query.order_by(Hold.placed_at.desc()).all()]
    session.close()
    return HoldListOut(holds=holds, total=len(holds))


@app.post("/api/holds", summary="Place a hold", description="Place a hold on a catalog title for pickup at a chosen branch; it joins the end of the title's queue.", tags=["holds"], operation_id="place_hold", response_model=HoldOut)
async def place_hold(body: HoldCreate):
    user_id = 1
    session = SessionLocal()
    waiting = session.query(Hold).filter(Hold.title_id == body.title_id, Hold.status == "waiting").count()
    hold = Hold(title_id=body.title_id, member_id=user_id, pickup_branch_id=body.pickup_branch_id, placed_at=_now(),
                status="waiting", queue_position=waiting + 1, notes=body.notes)
    session.add(hold)
    session.commit()
    result = _hold_out(session, hold)
    session.close()
    return result


@app.patch("/api/holds/{hold_id}", summary="Update a hold", description="Change the pickup branch or the note of one of my holds.", tags=["holds"], operation_id="update_hold", response_model=HoldOut)
async def update_hold(hold_id: int, body: HoldUpdate):
    user_id = 1
    session = SessionLocal()
    hold = session.query(Hold).filter(Hold.id == hold_id, Hold.member_id == user_id).first()
    if body.pickup_branch_id is not None:
        hold.pickup_branch_id = body.pickup_branch_id
    if body.notes is not None:
        hold.notes = body.notes
    session.commit()
    result = _hold_out(session, hold)
    session.close()
    return result


@app.post("/api/holds/{hold_id}/cancel", summary="Cancel a hold", description="Cancel one of my holds; members behind it in the queue move up one place.", tags=["holds"], operation_id="cancel_hold", response_model=HoldOut)
async def cancel_hold(hold_id: int):
    user_id = 1
    session = SessionLocal()
    hold = session.query(Hold).filter(Hold.id == hold_id, Hold.member_id == user_id).first()
    old_position = hold.queue_position
    hold.status = "cancelled"
    hold.queue_position = None
    if old_position is not None:
        for other in session.query(Hold).filter(Hold.title_id == hold.title_id, Hold.status == "waiting", Hold.queue_position > old_position).all():
            other.queue_position = other.queue_position - 1
    session.commit()
    result = _hold_out(session, hold)
    session.close()
    return result


@app.get("/api/fines", summary="List my fines", description="List the logged-in member's fines with the related title and the total still unpaid.", tags=["fines"], operation_id="list_my_fines", response_model=FineListOut)
async def list_my_fines(status: Optional[str] = Query(None, description="Fine status: unpaid, paid or waived", examples=["unpaid"])):
    user_id = 1
    session = SessionLocal()
    query = session.query(Fine).filter(Fine.member_id == user_id)
    if status:
        query = query.filter(Fine.status == status)
    fines = [_fine_out(session, f) for f in query.order_by(Fine.issued_at.desc()).all()]
    total_unpaid = session.query(func.coalesce(func.sum(Fine.amount), 0.0)).filter(Fine.member_id == user_id, Fine.status == "unpaid").scalar()
    session.close()
    return FineListOut(fines=fines, total_unpaid=round(total_unpaid, 2))


@app.post("/api/fines/{fine_id}/pay", summary="Pay a fine", description="Pay one of my fines in full with the given method and record the payment.", tags=["fines"], operation_id="pay_fine", response_model=FinePaymentOut)
async def pay_fine(fine_id: int, body: FinePaymentCreate):
    user_id = 1
    session = SessionLocal()
    fine = session.query(Fine).filter(Fine.id == fine_id, Fine.member_id == user_id).first()
    paid_at = _now()
    payment = FinePayment(fine_id=fine.id, member_id=user_id, amount=fine.amount, method=body.method, paid_at=paid_at)
    session.add(payment)
    fine.status = "paid"
    fine.paid_at = paid_at
    session.commit()
    result = FinePaymentOut(payment_id=payment.id, fine_id=fine.id, amount=payment.amount, method=payment.method,
                            paid_at=payment.paid_at, fine_status=fine.status)
    session.close()
    return result


@app.get("/api/reading-lists", summary="List my reading lists", description="List the logged-in member's reading lists with their item counts.", tags=["reading_lists"], operation_id="list_my_reading_lists", response_model=ReadingListsOut)
async def list_my_reading_lists():
    user_id = 1
    session = SessionLocal()
    lists = []
    for rl in session.query(ReadingList).filter(ReadingList.member_id == user_id).order_by(ReadingList.id).all():
        count = session.query(ReadingListItem).filter(ReadingListItem.reading_list_id == rl.id).count()
        lists.append(ReadingListOut(id=rl.id, name=rl.name, description=rl.description, is_public=bool(rl.is_public),
                                    created_at=rl.created_at, item_count=count))
    session.close()
    return ReadingListsOut(reading_lists=lists, total=len(lists))


@app.get("/api/reading-lists/{list_id}", summary="Get a reading list", description="Return one of my reading lists with all of its titles.", tags=["reading_lists"], operation_id="get_reading_list", response_model=ReadingListDetailOut)
async def get_reading_list(list_id: int):
    user_id = 1
    session = SessionLocal()
    rl = session.query(ReadingList).filter(ReadingList.id == list_id, ReadingList.member_id == user_id).first()
    result = _reading_list_detail(session, rl)
    session.close()
    return result


@app.post("/api/reading-lists", summary="Create a reading list", description="Create a new, empty reading list for the logged-in member.", tags=["reading_lists"], operation_id="create_reading_list", response_model=ReadingListDetailOut)
async def create_reading_list(body: ReadingListCreate):
    user_id = 1
    session = SessionLocal()
    rl = ReadingList(member_id=user_id, name=body.name, description=body.description, is_public=body.is_public, created_at=_now())
    session.add(rl)
    session.commit()
    result = _reading_list_detail(session, rl)
    session.close()
    return result


@app.post("/api/reading-lists/{list_id}/items", summary="Add a title to a reading list", description="Add a catalog title, with an optional note, to one of my reading lists.", tags=["reading_lists"], operation_id="add_title_to_reading_list", response_model=ReadingListDetailOut)
async def add_title_to_reading_list(list_id: int, body: ReadingListItemCreate):
    user_id = 1
    session = SessionLocal()
    rl = session.query(ReadingList).filter(ReadingList.id == list_id, ReadingList.member_id == user_id).first()
    session.add(ReadingListItem(reading_list_id=rl.id, title_id=body.title_id, note=body.note, added_at=_now()))
    session.commit()
    result = _reading_list_detail(session, rl)
    session.close()
    return result


@app.delete("/api/reading-lists/{list_id}/items/{item_id}", summary="Remove a title from a reading list", description="Delete one item from one of my reading lists.", tags=["reading_lists"], operation_id="remove_reading_list_item", response_model=DeleteResult)
async def remove_reading_list_item(list_id: int, item_id: int):
    user_id = 1
    session = SessionLocal()
    rl = session.query(ReadingList).filter(ReadingList.id == list_id, ReadingList.member_id == user_id).first()
    item = session.query(ReadingListItem).filter(ReadingListItem.id == item_id, ReadingListItem.reading_list_id == rl.id).first()
    session.delete(item)
    session.commit()
    session.close()
    return DeleteResult(success=True, message=f"Item {item_id} removed from reading list {list_id}")


@app.get("/api/events", summary="Search library events", description="List branch events filtered by title text, branch, type and a start date range (YYYY-MM-DD).", tags=["events"], operation_id="list_events", response_model=EventListOut)
async def list_events(
    q: Optional[str] = Query(None, description="Fragment of the event title", examples=["Watercolor"]),
    branch_id: Optional[int] = Query(None, description="Hosting branch ID", examples=[2]),
    event_type: Optional[str] = Query(None, description="Type: workshop, story_time, author_talk, tour, club or class", examples=["workshop"]),
    date_from: Optional[str] = Query(None, description="Earliest start date (YYYY-MM-DD)", examples=["2026-04-01"]),
    date_to: Optional[str] = Query(None, description="Latest start date (YYYY-MM-DD)", examples=["2026-04-30"]),
):
    session = SessionLocal()
    query = session.query(Event)
    if q:
        query = query.filter(Event.title.ilike(f"%{q}%"))
    if branch_id is not None:
        query = query.filter(Event.branch_id == branch_id)
    if event_type:
        query = query.filter(Event.event_type == event_type)
    if date_from:
        query = query.filter(func.date(Event.start_time) >= date_from)
    if date_to:
        query = query.filter(func.date(Event.start_time) <= date_to)
    events = [_event_out(session, e) for e in query.order_by(Event.start_time).all()]
    session.close()
    return EventListOut(events=events, total=len(events))


@app.get("/api/events/{event_id}", summary="Get an event", description="Return one event with its hosting branch and remaining capacity.", tags=["events"], operation_id="get_event", response_model=EventOut)
async def get_event(event_id: int):
    session = SessionLocal()
    result = _event_out(session, session.get(Event, event_id))
    session.close()
    return result


@app.post("/api/events/{event_id}/registrations", summary="Register for an event", description="Register the logged-in member, plus guests, for an event.", tags=["events"], operation_id="register_for_event", response_model=EventRegistrationOut)
async def register_for_event(event_id: int, body: EventRegistrationCreate):
    user_id = 1
    session = SessionLocal()
    reg = EventRegistration(event_id=event_id, member_id=user_id, num_attendees=body.num_attendees, status="registered", registered_at=_now())
    session.add(reg)
    session.commit()
    result = _registration_out(session, reg)
    session.close()
    return result


@app.get("/api/event-registrations", summary="List my event registrations", description="List the logged-in member's event registrations, optionally filtered by status.", tags=["events"], operation_id="list_my_event_registrations", response_model=EventRegistrationListOut)
async def list_my_event_registrations(status: Optional[str] = Query(None, description="Registration status: registered, cancelled or attended", examples=["registered"])):
    user_id = 1
    session = SessionLocal()
    query = session.query(EventRegistration).filter(EventRegistration.member_id == user_id)
    if status:
        query = query.filter(EventRegistration.status == status)
    regs = [_registration_out(session, r) for r in query.order_by(EventRegistration.id).all()]
    session.close()
    return EventRegistrationListOut(registrations=regs, total=len(regs))


@app.post("/api/event-registrations/{registration_id}/cancel", summary="Cancel an event registration", description="Cancel one of my event registrations.", tags=["events"], operation_id="cancel_event_registration", response_model=EventRegistrationOut)
async def cancel_event_registration(registration_id: int):
    user_id = 1
    session = SessionLocal()
    reg = session.query(EventRegistration).filter(EventRegistration.id == registration_id, EventRegistration.member_id == user_id).first()
    reg.status = "cancelled"
    session.commit()
    result = _registration_out(session, reg)
    session.close()
    return result


if __name__ == "__main__":
    import uvicorn
    host = os.getenv("HOST", "127.0.0.1")
    port = int(os.getenv("PORT", "8000"))
    uvicorn.run(app, host=host, port=port)
