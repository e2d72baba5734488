import os
from datetime import date, datetime, timedelta
from typing import List, Optional

from fastapi import FastAPI, Path, Query
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Boolean, Column, Date, DateTime, ForeignKey, Integer, String, Text, UniqueConstraint, create_engine, or_
from sqlalchemy.orm import declarative_base, relationship, sessionmaker

DATABASE_PATH = os.environ.get("DATABASE_PATH", "sqlite:///clinic_appointments.db")
engine = create_engine(DATABASE_PATH, connect_args={"check_same_thread": False})
SessionLocal = sessionmaker(bind=engine, autocommit=False, autoflush=False)
Base = declarative_base()


class User(Base):
    __tablename__ = "users"
    id = Column(Integer, primary_key=True)
    full_name = Column(String, nullable=False)
    email = Column(String, nullable=False, unique=True)
    phone = Column(String)
    date_of_birth = Column(Date, nullable=False)
    address = Column(String)
    emergency_contact = Column(String)
    created_at = Column(DateTime, nullable=False)


class Clinic(Base):
    __tablename__ = "clinics"
    id = Column(Integer, primary_key=True)
    name = Column(String, nullable=False, unique=True)
    address = Column(String, nullable=False)
    city = Column(String, nullable=False)
    state = Column(String, nullable=False)
    zip_code = Column(String, nullable=False)
    phone = Column(String, nullable=False)
    opening_hours = Column(String)


class Specialty(Base):
    __tablename__ = "specialties"
    id = Column(Integer, primary_key=True)
    name = Column(String, nullable=False, unique=True)
    description = Column(Text)


class Provider(Base):
    __tablename__ = "providers"
    id = Column(Integer, primary_key=True)
    first_name = Column(String, nullable=False)
    last_name = Column(String, nullable=False)
    credentials = Column(String, nullable=False)
    specialty_id = Column(Integer, ForeignKey("specialties.id"), nullable=False)
    clinic_id = Column(Integer, ForeignKey("clinics.id"), nullable=False)
    email = Column(String, unique=True)
    phone = Column(String)
    accepting_new_patients = Column(Boolean, nullable=False, default=True)
    years_experience = Column(Integer)
    bio = Column(Text)
    specialty = relationship("Specialty")
    clinic = relationship("Clinic")


class InsurancePolicy(Base):
    __tablename__ = "insurance_policies"
    __table_args__ = (UniqueConstraint("carrier_name", "member_id"),)
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    carrier_name = Column(String, nullable=False)
    plan_name = Column(String, nullable=False)
    member_id = Column(String, nullable=False)
    group_number = Column(String)
    coverage_start = Column(Date, nullable=False)
    coverage_end = Column(Date)
    is_primary = Column(Boolean, nullable=False, default=False)
    status = Column(String, nullable=False, default="active")
    created_at = Column(DateTime, nullable=False)


class AppointmentSlot(Base):
    __tablename__ = "appointment_slots"
    __table_args__ = (UniqueConstraint("provider_id", "start_time"),)
    id = Column(Integer, primary_key=True)
    provider_id = Column(Integer, ForeignKey("providers.id"), nullable=False)
    clinic_id = Column(Integer, ForeignKey("clinics.id"), nullable=False)
    start_time = Column(DateTime, nullable=False)
    end_time = Column(DateTime, nullable=False)
    is_booked = Column(Boolean, nullable=False, default=False)
    provider = relationship("Provider")
    clinic = relationship("Clinic")


class Appointment(Base):
    __tablename__ = "appointments"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    provider_id = Column(Integer, ForeignKey("providers.id"), nullable=False)
    clinic_id = Column(Integer, ForeignKey("clinics.id"), nullable=False)
    slot_id = Column(Integer, ForeignKey("appointment_slots.id"), nullable=False)
    appointment_type = Column(String, nullable=False, default="in_person")
    reason = Column(Text, nullable=False)
    status = Column(String, nullable=False, default="scheduled")
    scheduled_start = Column(DateTime, nullable=False)
    scheduled_end = Column(DateTime, nullable=False)
    insurance_policy_id = Column(Integer, ForeignKey("insurance_policies.id"))
    cancellation_reason = Column(Text)
    created_at = Column(DateTime, nullable=False)
    updated_at = Column(DateTime)
    provider = relationship("Provider")
    clinic = relationship("Clinic")


class Prescription(Base):
    __tablename__ = "prescriptions"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    provider_id = Column(Integer, ForeignKey("providers.id"), nullable=False)
    medication_name = Column(String, nullable=False)
    strength = Column(String, nullable=False)
    dosage_instructions = Column(Text, nullable=False)
    quantity = Column(Integer, nullable=False)
    refills_remaining = Column(Integer, nullable=False, default=0)
    pharmacy_name = Column(String)
    start_date = Column(Date, nullable=False)
    end_date = Column(Date)
    status = Column(String, nullable=False, default="active")
    created_at = Column(DateTime, nullable=False)
    provider = relationship("Provider")


class RefillRequest(Base):
    __tablename__ = "refill_requests"
    id = Column(Integer, primary_key=True)
    prescription_id = Column(Integer, ForeignKey("prescriptions.id"), nullable=False)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    pharmacy_name = Column(String, nullable=False)
    status = Column(String, nullable=False, default="pending")
    notes = Column(Text)
    requested_at = Column(DateTime, nullable=False)
    processed_at = Column(DateTime)
    prescription = relationship("Prescription")


class Message(Base):
    __tablename__ = "messages"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    provider_id = Column(Integer, ForeignKey("providers.id"), nullable=False)
    direction = Column(String, nullable=False)
    subject = Column(String, nullable=False)
    body = Column(Text, nullable=False)
    is_read = Column(Boolean, nullable=False, default=False)
    sent_at = Column(DateTime, nullable=False)
    provider = relationship("Provider")


class LabResult(Base):
    __tablename__ = "lab_results"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    ordering_provider_id = Column(Integer, ForeignKey("providers.id"), nullable=False)
    test_name = Column(String, nullable=False)
    result_value = Column(String)
    unit = Column(String)
    reference_range = Column(String)
    flag = Column(String)
    status = Column(String, nullable=False, default="pending")
    collected_at = Column(DateTime, nullable=False)
    resulted_at = Column(DateTime)
    ordering_provider = relationship("Provider")


Base.metadata.create_all(engine)

app = FastAPI(title="Riverside Clinic Appointments API", version="1.0.0")


class UserOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Patient user id", examples=[1])
    full_name: str = Field(..., description="Patient full name", examples=["Maya Thornton"])
    email: str = Field(..., description="Email address", examples=["maya.thornton@example.com"])
    phone: Optional[str] = Field(None, description="Phone number", examples=["555-201-3344"])
    date_of_birth: date = Field(..., description="Date of birth", examples=["1986-07-14"])
    address: Optional[str] = Field(None, description="Home address", examples=["418 Willow Bend Rd, Riverside, OR 97401"])
    emergency_contact: Optional[str] = Field(None, description="Emergency contact", examples=["Evan Thornton (spouse) 555-201-9087"])
    created_at: datetime = Field(..., description="Account creation time", examples=["2024-03-02T09:15:00"])


class ClinicOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Clinic id", examples=[1])
    name: str = Field(..., description="Clinic name", examples=["Riverside Downtown Clinic"])
    address: str = Field(..., description="Street address", examples=["200 Main St"])
    city: str = Field(..., description="City", examples=["Riverside"])
    state: str = Field(..., description="State code", examples=["OR"])
    zip_code: str = Field(..., description="ZIP code", examples=["97401"])
    phone: str = Field(..., description="Front desk phone", examples=["555-400-1000"])
    opening_hours: Optional[str] = Field(None, description="Opening hours", examples=["Mon-Fri 07:30-18:00"])


class SpecialtyOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Specialty id", examples=[2])
    name: str = Field(..., description="Specialty name", examples=["Cardiology"])
    description: Optional[str] = Field(None, description="What the specialty covers", examples=["Diagnosis and treatment of heart conditions."])


class ProviderOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Provider id", examples=[1])
    first_name: str = Field(..., description="First name", examples=["Priya"])
    last_name: str = Field(..., description="Last name", examples=["Natarajan"])
    credentials: str = Field(..., description="Professional credentials", examples=["MD"])
    specialty_id: int = Field(..., description="Specialty id", examples=[1])
    specialty_name: str = Field(..., description="Specialty name", examples=["Family Medicine"])
    clinic_id: int = Field(..., description="Home clinic id", examples=[1])
    clinic_name: str = Field(..., description="Home clinic name", examples=["Riverside Downtown Clinic"])
    email: Optional[str] = Field(None, description="Provider email", examples=["p.natarajan@riversideclinic.example"])
    phone: Optional[str] = Field(None, description="Provider office phone", examples=["555-400-1011"])
    accepting_new_patients: bool = Field(..., description="Whether the provider accepts new patients", examples=[True])
    years_experience: Optional[int] = Field(None, description="Years in practice", examples=[14])
    bio: Optional[str] = Field(None, description="Short biography", examples=["Board-certified family physician."])


class SlotOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Slot id", examples=[10])
    provider_id: int = Field(..., description="Provider id", examples=[3])
    clinic_id: int = Field(..., description="Clinic id", examples=[1])
    start_time: datetime = Field(..., description="Slot start", examples=["2026-04-16T10:30:00"])
    end_time: datetime = Field(..., description="Slot end", examples=["2026-04-16T11:00:00"])
    is_booked: bool = Field(..., description="Whether the slot is already booked", examples=[False])


class AppointmentOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Appointment id", examples=[3])
    provider_id: int = Field(..., description="Provider id", examples=[1])
    provider_name: str = Field(..., description="Provider display name", examples=["Dr. Priya Natarajan"])
    clinic_id: int = Field(..., description="Clinic id", examples=[1])
    clinic_name: str = Field(..., description="Clinic name", examples=["Riverside Downtown Clinic"])
    slot_id: int = Field(..., description="Booked slot id", examples=[1])
    appointment_type: str = Field(..., description="in_person or telehealth", examples=["in_person"])
    reason: str = Field(..., description="Reason for the visit", examples=["Blood pressure medication follow-up"])
    status: str = Field(..., description="scheduled, completed, cancelled or no_show", examples=["scheduled"])
    scheduled_start: datetime = Field(..., description="Start time", examples=["2026-04-14T09:30:00"])
    scheduled_end: datetime = Field(..., description="End time", examples=["2026-04-14T10:00:00"])
    insurance_policy_id: Optional[int] = Field(None, description="Insurance policy billed", examples=[1])
    cancellation_reason: Optional[str] = Field(None, description="Reason given when cancelled", examples=["Schedule conflict"])
    created_at: datetime = Field(..., description="Booking time", examples=["2026-03-02T12:10:00"])
    updated_at: Optional[datetime] = Field(None, description="Last change time", examples=["2026-03-30T09:00:00"])


class BookAppointmentRequest(BaseModel):
    slot_id: int = Field(..., description="Id of an open appointment slot", examples=[10])
    reason: str = Field(..., description="Reason for the visit", examples=["Skin rash follow-up"])
    appointment_type: str = Field("in_person", description="in_person or telehealth", examples=["in_person"])
    insurance_policy_id: Optional[int] = Field(None, description="Id of one of your insurance policies to bill", examples=[1])


class RescheduleAppointmentRequest(BaseModel):
    new_slot_id: int = Field(..., description="Id of the open slot to move the appointment to", examples=[7])


class CancelAppointmentRequest(BaseModel):
    cancellation_reason: Optional[str] = Field(None, description="Why the appointment is cancelled", examples=["Schedule conflict at work"])


class PrescriptionOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Prescription id", examples=[1])
    provider_id: int = Field(..., description="Prescribing provider id", examples=[1])
    prescriber_name: str = Field(..., description="Prescribing provider name", examples=["Dr. Priya Natarajan"])
    medication_name: str = Field(..., description="Medication", examples=["Lisinopril"])
    strength: str = Field(..., description="Strength", examples=["10 mg"])
    dosage_instructions: str = Field(..., description="How to take it", examples=["Take 1 tablet by mouth once daily"])
    quantity: int = Field(..., description="Quantity per fill", examples=[30])
    refills_remaining: int = Field(..., description="Refills remaining", examples=[2])
    pharmacy_name: Optional[str] = Field(None, description="Preferred pharmacy", examples=["Walgreens - Main Street"])
    start_date: date = Field(..., description="Start date", examples=["2026-01-05"])
    end_date: Optional[date] = Field(None, description="End date", examples=["2026-12-31"])
    status: str = Field(..., description="active, expired or discontinued", examples=["active"])


class RefillRequestCreate(BaseModel):
    pharmacy_name: Optional[str] = Field(None, description="Pharmacy to send the refill to; defaults to the prescription's pharmacy", examples=["CVS Pharmacy - Elm Street"])
    notes: Optional[str] = Field(None, description="Note for the care team", examples=["Almost out of tablets"])


class RefillRequestOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Refill request id", examples=[4])
    prescription_id: int = Field(..., description="Prescription id", examples=[3])
    medication_name: str = Field(..., description="Medication", examples=["Atorvastatin"])
    strength: str = Field(..., description="Strength", examples=["20 mg"])
    pharmacy_name: str = Field(..., description="Pharmacy", examples=["CVS Pharmacy - Elm Street"])
    status: str = Field(..., description="pending, approved, denied or cancelled", examples=["pending"])
    notes: Optional[str] = Field(None, description="Patient note", examples=["Almost out of tablets"])
    requested_at: datetime = Field(..., description="Request time", examples=["2026-03-30T10:00:00"])
    processed_at: Optional[datetime] = Field(None, description="When the clinic processed it", examples=["2026-03-31T09:00:00"])


class InsurancePolicyOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Policy id", examples=[1])
    carrier_name: str = Field(..., description="Insurance carrier", examples=["Blue Harbor Health"])
    plan_name: str = Field(..., description="Plan name", examples=["Gold HMO 500"])
    member_id: str = Field(..., description="Member id on the card", examples=["BHH-448812307"])
    group_number: Optional[str] = Field(None, description="Group number", examples=["GRP-20931"])
    coverage_start: date = Field(..., description="Coverage start", examples=["2026-01-01"])
    coverage_end: Optional[date] = Field(None, description="Coverage end", examples=["2026-12-31"])
    is_primary: bool = Field(..., description="Primary (true) or secondary (false)", examples=[True])
    status: str = Field(..., description="active or inactive", examples=["active"])
    created_at: datetime = Field(..., description="When the policy was added", examples=["2025-12-15T11:00:00"])


class InsurancePolicyCreate(BaseModel):
    carrier_name: str = Field(..., description="Insurance carrier", examples=["Summit Mutual"])
    plan_name: str = Field(..., description="Plan name", examples=["Silver PPO 2000"])
    member_id: str = Field(..., description="Member id on the card", examples=["SMU-5520918"])
    group_number: Optional[str] = Field(None, description="Group number", examples=["G-40021"])
    coverage_start: date = Field(..., description="Coverage start date", examples=["2026-05-01"])
    coverage_end: Optional[date] = Field(None, description="Coverage end date", examples=["2027-04-30"])
    is_primary: bool = Field(False, description="Whether this is the primary policy", examples=[False])


class InsurancePolicyUpdate(BaseModel):
    plan_name: Optional[str] = Field(None, description="New plan name", examples=["Gold HMO 500"])
    member_id: Optional[str] = Field(None, description="New member id", examples=["BHH-448812307"])
    group_number: Optional[str] = Field(None, description="New group number", examples=["GRP-20931"])
    coverage_start: Optional[date] = Field(None, description="New coverage start", examples=["2026-01-01"])
    coverage_end: Optional[date] = Field(None, description="New coverage end", examples=["2026-12-31"])
    is_primary: Optional[bool] = Field(None, description="Primary flag", examples=[True])
    status: Optional[str] = Field(None, description="active or inactive", examples=["inactive"])


class MessageOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Message id", examples=[1])
    provider_id: int = Field(..., description="Provider id", examples=[1])
    provider_name: str = Field(..., description="Provider name", examples=["Dr. Priya Natarajan"])
    direction: str = Field(..., description="patient_to_provider or provider_to_patient", examples=["provider_to_patient"])
    subject: str = Field(..., description="Subject", examples=["Your February lab results are ready"])
    body: str = Field(..., description="Message text", examples=["Your results are posted."])
    is_read: bool = Field(..., description="Whether the message has been read", examples=[False])
    sent_at: datetime = Field(..., description="Send time", examples=["2026-02-19T16:20:00"])


class SendMessageRequest(BaseModel):
    provider_id: int = Field(..., description="Provider to write to", examples=[7])
    subject: str = Field(..., description="Subject line", examples=["Metformin side effects"])
    body: str = Field(..., description="Message text", examples=["I have had mild nausea this week."])


class LabResultOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Lab result id", examples=[2])
    ordering_provider_id: int = Field(..., description="Ordering provider id", examples=[1])
    ordering_provider_name: str = Field(..., description="Ordering provider name", examples=["Dr. Priya Natarajan"])
    test_name: str = Field(..., description="Test name", examples=["Hemoglobin A1c"])
    result_value: Optional[str] = Field(None, description="Result value (null while pending)", examples=["6.4"])
    unit: Optional[str] = Field(None, description="Unit", examples=["%"])
    reference_range: Optional[str] = Field(None, description="Reference range", examples=["4.0-5.6"])
    flag: Optional[str] = Field(None, description="normal, high, low or abnormal", examples=["high"])
    status: str = Field(..., description="pending or final", examples=["final"])
    collected_at: datetime = Field(..., description="Specimen collection time", examples=["2026-02-18T08:15:00"])
    resulted_at: Optional[datetime] = Field(None, description="Result time", examples=["2026-02-19T12:30:00"])


def provider_display_name(provider):
    return f"Dr. {provider.first_name} {provider.last_name}"


def provider_to_out(provider):
    return ProviderOut(
        id=provider.id,
        first_name=provider.first_name,
        last_name=provider.last_name,
        credentials=provider.credentials,
        specialty_id=provider.specialty_id,
        specialty_name=provider.specialty.name,
        clinic_id=provider.clinic_id,
        clinic_name=provider.clinic.name,
        email=provider.email,
        phone=provider.phone,
        accepting_new_patients=provider.accepting_new_patients,
        years_experience=provider.years_experience,
        bio=provider.bio,
    )


def appointment_to_out(appointment):
    return AppointmentOut(
        id=appointment.id,
        provider_id=appointment.provider_id,
        provider_name=provider_display_name(appointment.provider),
        clinic_id=appointment.clinic_id,
        clinic_name=appointment.clinic.name,
        slot_id=appointment.slot_id,
        appointment_type=appointment.appointment_type,
        reason=appointment.reason,
        status=appointment.status,
        scheduled_start=appointment.scheduled_start,
        scheduled_end=appointment.scheduled_end,
        insurance_policy_id=appointment.insurance_policy_id,
        cancellation_reason=appointment.cancellation_reason,
        created_at=appointment.created_at,
        updated_at=appointment.updated_at,
    )


def prescription_to_out(prescription):
    return PrescriptionOut(
        id=prescription.id,
        provider_id=prescription.provider_id,
        prescriber_name=provider_display_name(prescription.provider),
        medication_name=prescription.medication_name,
        strength=prescription.strength,
        dosage_instructions=prescription.dosage_instructions,
        quantity=prescription.quantity,
        refills_remaining=prescription.refills_remaining,
        pharmacy_name=prescription.pharmacy_name,
        start_date=prescription.start_date,
        end_date=prescription.end_date,
        status=prescription.status,
    )


def refill_request_to_out(refill):
    return RefillRequestOut(
        id=refill.id,
        prescription_id=refill.prescription_id,
        medication_name=refill.prescription.medication_name,
        strength=refill.prescription.strength,
        pharmacy_name=refill.pharmacy_name,
        status=refill.status,
        notes=refill.notes,
        requested_at=refill.requested_at,
        processed_at=refill.processed_at,
    )


def message_to_out(message):
    return MessageOut(
        id=message.id,
        provider_id=message.provider_id,
        provider_name=provider_display_name(message.provider),
        direction=message.direction,
        subject=message.subject,
        body=message.body,
        is_read=message.is_read,
        sent_at=message.sent_at,
    )


def lab_result_to_out(lab):
    return LabResultOut(
        id=lab.id,
        ordering_provider_id=lab.ordering_provider_id,
        ordering_provider_name=provider_display_name(lab.ordering_provider),
        test_name=lab.test_name,
        result_value=lab.result_value,
        unit=lab.unit,
        reference_range=lab.reference_range,
        flag=lab.flag,
        status=lab.status,
        collected_at=lab.collected_at,
        resulted_at=lab.resulted_at,
    )


def current_time():
    return datetime.now().replace(microsecond=0)


@app.get("/api/me", summary="Get my patient profile", description="Return the profile of the logged-in patient.", tags=["profile"], operation_id="get_my_profile", response_model=UserOut)
async def get_my_profile():
    user_id = 1
    session = SessionLocal()
    user = session.query(User).filter(User.id == user_id).first()
    result = UserOut.model_validate(user)
    session.close()
    return result


@app.get("/api/clinics", summary="List clinic locations", description="List Riverside clinic locations, optionally filtered by name or city.", tags=["clinics"], operation_id="list_clinics", response_model=List[ClinicOut])
async def list_clinics(
    name: Optional[str] = Query(None, description="Part of the clinic name", examples=["Downtown"]),
    city: Optional[str] = Query(None, description="City", examples=["Riverside"]),
):
    session = SessionLocal()
    query = session.query(Clinic)
    if name:
        query = query.filter(Clinic.name.ilike(f"%{name}%"))
    if city:
        query = query.filter(Clinic.city.ilike(f"%{city}%"))
    result = [ClinicOut.model_validate(c) for c in query.order_by(Clinic.id).all()]
    session.close()
    return result


@app.get("/api/specialties", summary="List medical specialties", description="List all medical specialties offered by the clinic group.", tags=["providers"], operation_id="list_specialties", response_model=List[SpecialtyOut])
async def list_specialties():
    session = SessionLocal()
    result = [SpecialtyOut.model_validate(s) for s in session.query(Specialty).order_by(Specialty.name).all()]
    session.close()
    return result


@app.get("/api/providers", summary="Search providers", description="Search doctors by name, specialty, clinic or whether they accept new patients.", tags=["providers"], operation_id="search_providers", response_model=List[ProviderOut])
async def search_providers(
    name: Optional[str] = Query(None, description="Part of the provider's first, last or full name", examples=["Natarajan"]),
    specialty: Optional[str] = Query(None, description="Part of the specialty name", examples=["Cardiology"]),
    clinic_id: Optional[int] = Query(None, description="Clinic id", examples=[1]),
    accepting_new_patients: Optional[bool] = Query(None, description="Only providers accepting (true) or not accepting (false) new patients", examples=[True]),
):
    session = SessionLocal()
    query = session.query(Provider).join(Specialty, Provider.specialty_id == Specialty.id)
    if name:
        pattern = f"%{name.replace('Dr. ', '').replace('Dr ', '').strip()}%"
        query = query.filter(or_(Provider.first_name.ilike(pattern), Provider.last_name.ilike(pattern), (Provider.first_name + " " + Provider.last_name).ilike(pattern)))
    if specialty:
        query = query.filter(Specialty.name.ilike(f"%{specialty}%"))
    if clinic_id is not None:
        query = query.filter(Provider.clinic_id == clinic_id)
    if accepting_new_patients is not None:
        query = query.filter(Provider.accepting_new_patients == accepting_new_patients)
    result = [provider_to_out(p) for p in query.order_by(Provider.last_name, Provider.first_name).all()]
    session.close()
    return result


@app.get("/api/providers/{provider_id}", summary="Get a provider", description="Get the details of one provider by id.", tags=["providers"], operation_id="get_provider", response_model=ProviderOut)
async def get_provider(provider_id: int = Path(..., description="Provider id", examples=[1])):
    session = SessionLocal()
    provider = session.query(Provider).filter(Provider.id == provider_id).first()
    result = provider_to_out(provider)
    session.close()
    return result


@app.get("/api/providers/{provider_id}/slots", summary="List a provider's appointment slots", description="List appointment slots of a provider, optionally for one day and only open ones.", tags=["appointments"], operation_id="list_provider_slots", response_model=List[SlotOut])
async def list_provider_slots(
    provider_id: int = Path(..., description="Provider id", examples=[3]),
    date: Optional[date] = Query(None, description="Day to list (YYYY-MM-DD)", examples=["2026-04-16"]),
    available_only: Optional[bool] = Query(None, description="Only slots that are not booked", examples=[True]),
):
    session = SessionLocal()
    query = session.query(AppointmentSlot).filter(AppointmentSlot.provider_id == provider_id)
    if date is not None:
        day_start = datetime(date.year, date.month, date.day)
        query = query.filter(AppointmentSlot.start_time >= day_start, AppointmentSlot.start_time < day_start + timedelta(days=1))
    if available_only:
        query = query.filter(AppointmentSlot.is_booked == False)
    result = [SlotOut.model_validate(s) for s in query.order_by(AppointmentSlot.start_time).all()]
    session.close()
    return result


@app.get("/api/appointments", summary="List my appointments", description="List the patient's appointments filtered by status, provider or date range.", tags=["appointments"], operation_id="list_my_appointments", response_model=List[AppointmentOut])
async def list_my_appointments(
    status: Optional[str] = Query(None, description="scheduled, completed, cancelled or no_show", examples=["scheduled"]),
    provider_id: Optional[int] = Query(None, description="Provider id", examples=[1]),
    from_date: Optional[date] = Query(None, description="Earliest appointment date (YYYY-MM-DD)", examples=["2026-04-01"]),
    to_date: Optional[date] = Query(None, description="Latest appointment date (YYYY-MM-DD)", examples=["2026-04-30"]),
):
    user_id = 1
    session = SessionLocal()
    query = session.query(Appointment).filter(Appointment.user_id == user_id)
    if status:
        query = query.filter(Appointment.status == status)
    if provider_id is not None:
        query = query.filter(Appointment.provider_id == provider_id)
    if from_date is not None:
        query = query.filter(Appointment.scheduled_start >= datetime(from_date.year, from_date.month, from_date.day))
    if to_date is not None:
        query = query.filter(Appointment.scheduled_start < datetime(to_date.year, to_date.month, to_date.day) + timedelta(days=1))
    result = [appointment_to_out(a) for a in query.order_by(Appointment.scheduled_start).all()]
    session.close()
    return result


@app.get("/api/appointments/{appointment_id}", summary="Get one of my appointments", description="Get the details of one of the patient's appointments.", tags=["appointments"], operation_id="get_appointment", response_model=AppointmentOut)
async def get_appointment(appointment_id: int = Path(..., description="Appointment id", examples=[3])):
    user_id = 1
    session = SessionLocal()
    appointment = session.query(Appointment).filter(Appointment.id == appointment_id, Appointment.user_id == user_id).first()
    result = appointment_to_out(appointment)
    session.close()
    return result


@app.post("/api/appointments", summary="Book an appointment", description="Book an open appointment slot for the patient with a visit reason and optional insurance.", tags=["appointments"], operation_id="book_appointment", response_model=AppointmentOut)
async def book_appointment(payload: BookAppointmentRequest):
    user_id = 1
    session = SessionLocal()
    slot = session.query(AppointmentSlot).filter(AppointmentSlot.id == payload.slot_id).first()
    appointment = Appointment(
        user_id=user_id,
        provider_id=slot.provider_id,
        clinic_id=slot.clinic_id,
        slot_id=slot.id,
        appointment_type=payload.appointment_type,
        reason=payload.reason,
        status="scheduled",
        scheduled_start=slot.start_time,
        scheduled_end=slot.end_time,
        insurance_policy_id=payload.insurance_policy_id,
        created_at=current_time(),
    )
    slot.is_booked = True
    session.add(appointment)
    session.commit()
    session.refresh(appointment)
    result = appointment_to_out(appointment)
    session.close()
    return result


@app.patch("/api/appointments/{appointment_id}/reschedule", summary="Reschedule an appointment", description="Move one of the patient's appointments to another open slot and free the old slot.", tags=["appointments"], operation_id="reschedule_appointment", response_model=AppointmentOut)
async def reschedule_appointment(payload: RescheduleAppointmentRequest, appointment_id: int = Path(..., description="Appointment id", examples=[5])):
    user_id = 1
    session = SessionLocal()
    appointment = session.query(Appointment).filter(Appointment.id == appointment_id, Appointment.user_id == user_id).first()
    old_slot = session.query(AppointmentSlot).filter(AppointmentSlot.id == appointment.slot_id).first()
    new_slot = session.query(AppointmentSlot).filter(AppointmentSlot.id == payload.new_slot_id).first()
    old_slot.is_booked = False
    new_slot.is_booked = True
    appointment.slot_id = new_slot.id
    appointment.provider_id = new_slot.provider_id
    appointment.clinic_id = new_slot.clinic_id
    appointment.scheduled_start = new_slot.start_time
    appointment.scheduled_end = new_slot.end_time
    appointment.updated_at = current_time()
    session.commit()
    session.refresh(appointment)
    result = appointment_to_out(appointment)
    session.close()
    return result


@app.post("/api/appointments/{appointment_id}/cancel", summary="Cancel an appointment", description="Cancel one of the patient's appointments with a reason and release its slot.", tags=["appointments"], operation_id="cancel_appointment", response_model=AppointmentOut)
async def cancel_appointment(payload: CancelAppointmentRequest = CancelAppointmentRequest(), appointment_id: int = Path(..., description="Appointment id", examples=[3])):
    user_id = 1
    session = SessionLocal()
    appointment = session.query(Appointment).filter(Appointment.id == appointment_id, Appointment.user_id == user_id).first()
    slot = session.query(AppointmentSlot).filter(AppointmentSlot.id == appointment.slot_id).first()
    appointment.status = "cancelled"
    appointment.cancellation_reason = payload.cancellation_reason
    appointment.updated_at = current_time()
    slot.is_booked = False
    session.commit()
    session.refresh(appointment)
    result = appointment_to_out(appointment)
    session.close()
    return result


@app.get("/api/prescriptions", summary="List my prescriptions", description="List the patient's prescriptions filtered by status or medication name.", tags=["prescriptions"], operation_id="list_my_prescriptions", response_model=List[PrescriptionOut])
async def list_my_prescriptions(
    status: Optional[str] = Query(None, description="active, expired or discontinued", examples=["active"]),
    medication: Optional[str] = Query(None, description="Part of the medication name", examples=["Lisinopril"]),
):
    user_id = 1
    session = SessionLocal()
    query = session.query(Prescription).filter(Prescription.user_id == user_id)
    if status:
        query = query.filter(Prescription.status == status)
    if medication:
        query = query.filter(Prescription.medication_name.ilike(f"%{medication}%"))
    result = [prescription_to_out(p) for p in query.order_by(Prescription.medication_name, Prescription.id).all()]
    session.close()
    return result


@app.post("/api/prescriptions/{prescription_id}/refill-requests", summary="Request a prescription refill", description="Submit a refill request for one of the patient's prescriptions to a pharmacy.", tags=["prescriptions"], operation_id="request_prescription_refill", response_model=RefillRequestOut)
async def request_prescription_refill(payload: RefillRequestCreate = RefillRequestCreate(), prescription_id: int = Path(..., description="Prescription id", examples=[3])):
    user_id = 1
    session = SessionLocal()
    prescription = session.query(Prescription).filter(Prescription.id == prescription_id, Prescription.user_id == user_id).first()
    refill = RefillRequest(
        prescription_id=prescription.id,
        user_id=user_id,
        pharmacy_name=payload.pharmacy_name or prescription.pharmacy_name,
        status="pending",
        notes=payload.notes,
        requested_at=current_time(),
    )
    session.add(refill)
    session.commit()
    session.refresh(refill)
    result = refill_request_to_out(refill)
    session.close()
    return result


@app.get("/api/refill-requests", summary="List my refill requests", description="List the patient's prescription refill requests, optionally by status.", tags=["prescriptions"], operation_id="list_my_refill_requests", response_model=List[RefillRequestOut])
async def list_my_refill_requests(
    status: Optional[str] = Query(None, description="pending, approved, denied or cancelled", examples=["pending"]),
):
    user_id = 1
    session = SessionLocal()
    query = session.query(RefillRequest).filter(RefillRequest.user_id == user_id)
    if status:
        query = query.filter(RefillRequest.status == status)
    result = [refill_request_to_out(r) for r in query.order_by(RefillRequest.requested_at.desc()).all()]
    session.close()
    return result


@app.delete("/api/refill-requests/{refill_request_id}", summary="Cancel a refill request", description="Withdraw one of the patient's refill requests by marking it cancelled.", tags=["prescriptions"], operation_id="cancel_refill_request", response_model=RefillRequestOut)
async def cancel_refill_request(refill_request_id: int = Path(..., description="Refill request id", examples=[1])):
    user_id = 1
    session = SessionLocal()
    refill = session.query(RefillRequest).filter(RefillRequest.id == refill_request_id, RefillRequest.user_id == user_id).first()
    refill.status = "cancelled"
    refill.processed_at = current_time()
    session.commit()
    session.refresh(refill)
    result = refill_request_to_out(refill)
    session.close()
    return result


@app.get("/api/insurance-policies", summary="List my insurance policies", description="List the patient's insurance policies filtered by carrier or status.", tags=["insurance"], operation_id="list_my_insurance_policies", response_model=List[InsurancePolicyOut])
async def list_my_insurance_policies(
    carrier: Optional[str] = Query(None, description="Part of the carrier name", examples=["Blue Harbor"]),
    status: Optional[str] = Query(None, description="active or inactive", examples=["active"]),
):
    user_id = 1
    session = SessionLocal()
    query = session.query(InsurancePolicy).filter(InsurancePolicy.user_id == user_id)
    if carrier:
        query = query.filter(InsurancePolicy.carrier_name.ilike(f"%{carrier}%"))
    if status:
        query = query.filter(InsurancePolicy.status == status)
    result = [InsurancePolicyOut.model_validate(p) for p in query.order_by(InsurancePolicy.id).all()]
    session.close()
    return result


@app.post("/api/insurance-policies", summary="Add an insurance policy", description="Add a new insurance policy to the patient's file.", tags=["insurance"], operation_id="add_insurance_policy", response_model=InsurancePolicyOut)
async def add_insurance_policy(payload: InsurancePolicyCreate):
    user_id = 1
    session = SessionLocal()
    policy = InsurancePolicy(
        user_id=user_id,
        carrier_name=payload.carrier_name,
        plan_name=payload.plan_name,
        member_id=payload.member_id,
        group_number=payload.group_number,
        coverage_start=payload.coverage_start,
        coverage_end=payload.coverage_end,
        is_primary=payload.is_primary,
        status="active",
        created_at=current_time(),
    )
    session.add(policy)
    session.commit()
    session.refresh(policy)
    result = InsurancePolicyOut.model_validate(policy)
    session.close()
    return result


@app.put("/api/insurance-policies/{policy_id}", summary="Update an insurance policy", description="Update fields of one of the patient's insurance policies.", tags=["insurance"], operation_id="update_insurance_policy", response_model=InsurancePolicyOut)
async def update_insurance_policy(payload: InsurancePolicyUpdate = InsurancePolicyUpdate(), policy_id: int = Path(..., description="Policy id", examples=[1])):
    user_id = 1
    session = SessionLocal()
    policy = session.query(InsurancePolicy).filter(InsurancePolicy.id == policy_id, InsurancePolicy.user_id == user_id).first()
    for field_name, value in payload.model_dump(exclude_unset=True).items():
        setattr(policy, field_name, value)
    session.commit()
    session.refresh(policy)
    result = InsurancePolicyOut.model_validate(policy)
    session.close()
    return result


@app.get("/api/messages", summary="List my care team messages", description="List messages between the patient and providers, filtered by provider, direction or unread.", tags=["messages"], operation_id="list_my_messages", response_model=List[MessageOut])
async def list_my_messages(
    provider_id: Optional[int] = Query(None, description="Provider id", examples=[1]),
    direction: Optional[str] = Query(None, description="patient_to_provider or provider_to_patient", examples=["provider_to_patient"]),
    unread_only: Optional[bool] = Query(None, description="Only unread messages", examples=[True]),
):
    user_id = 1
    session = SessionLocal()
    query = session.query(Message).filter(Message.user_id == user_id)
    if provider_id is not None:
        query = query.filter(Message.provider_id == provider_id)
    if direction:
        query = query.filter(Message.direction == direction)
    if unread_only:
        query = query.filter(Message.is_read == False)
    result = [message_to_out(m) for m in query.order_by(Message.sent_at.desc()).all()]
    session.close()
    return result


@app.post("/api/messages", summary="Send a message to a provider", description="Send a secure message from the patient to a provider on the care team.", tags=["messages"], operation_id="send_message_to_provider", response_model=MessageOut)
async def send_message_to_provider(payload: SendMessageRequest):
    user_id = 1
    session = SessionLocal()
    message = Message(
        user_id=user_id,
        provider_id=payload.provider_id,
        direction="patient_to_provider",
        subject=payload.subject,
        body=payload.body,
        is_read=True,
        sent_at=current_time(),
    )
    session.add(message)
    session.commit()
    session.refresh(message)
    result = message_to_out(message)
    session.close()
    return result


@app.patch("/api/messages/{message_id}/read", summary="Mark a message as read", description="Mark one of the patient's messages as read.", tags=["messages"], operation_id="mark_message_read", response_model=MessageOut)
async def mark_message_read(message_id: int = Path(..., description="Message id", examples=[1])):
    user_id = 1
    session = SessionLocal()
    message = session.query(Message).filter(Message.id == message_id, Message.user_id == user_id).first()
    message.is_read = True
    session.commit()
    session.refresh(message)
    result = message_to_out(message)
    session.close()
    return result


@app.get("/api/lab-results", summary="List my lab results", description="List the patient's lab results filtered by test name, status or collection date range.", tags=["lab results"], operation_id="list_my_lab_results", response_model=List[LabResultOut])
async def list_my_lab_results(
    test_name: Optional[str] = Query(None, description="Part of the test name", examples=["A1c"]),
    status: Optional[str] = Query(None, description="pending or final", examples=["final"]),
    from_date: Optional[date] = Query(None, description="Earliest collection date (YYYY-MM-DD)", examples=["2026-02-01"]),
    to_date: Optional[date] = Query(None, description="Latest collection date (YYYY-MM-DD)", examples=["2026-02-28"]),
):
    user_id = 1
    session = SessionLocal()
    query = session.query(LabResult).filter(LabResult.user_id == user_id)
    if test_name:
        query = query.filter(LabResult.test_name.ilike(f"%{test_name}%"))
    if status:
        query = query.filter(LabResult.status == status)
    if from_date is not None:
        query = query.filter(LabResult.collected_at >= datetime(from_date.year, from_date.month, from_date.day))
    if to_date is not None:
        query = query.filter(LabResult.collected_at < datetime(to_date.year, to_date.month, to_date.day) + timedelta(days=1))
    result = [lab_result_to_out(l) for l in query.order_by(LabResult.collected_at.desc()).all()]
    session.close()
    return result


if __name__ == "__main__":
    import uvicorn
    host = os.getenv("HOST", "127.0.0.1")
    port = int(os.getenv("PORT", "8000"))
    uvicorn.run(app, host=host, port=port)
