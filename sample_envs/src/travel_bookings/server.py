import os
from datetime import date, datetime
from typing import List, Optional

from fastapi import FastAPI, Query
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Column, Float, ForeignKey, Integer, String, create_engine, or_
from sqlalchemy.orm import declarative_base, relationship, sessionmaker

DATABASE_PATH = os.environ.get("DATABASE_PATH", "sqlite:///skyway_travel_bookings.db")
engine = create_engine(DATABASE_PATH, connect_args={"check_same_thread": False})
SessionLocal = sessionmaker(bind=engine, autocommit=False, autoflush=False)
Base = declarative_base()


class User(Base):
    __tablename__ = "users"
    id = Column(Integer, primary_key=True)
    username = Column(String, nullable=False, unique=True)
    email = Column(String, nullable=False, unique=True)
    full_name = Column(String, nullable=False)
    phone = Column(String)
    date_of_birth = Column(String)
    nationality = Column(String)
    created_at = Column(String, nullable=False)


class Airport(Base):
    __tablename__ = "airports"
    id = Column(Integer, primary_key=True)
    iata_code = Column(String, nullable=False, unique=True)
    name = Column(String, nullable=False)
    city = Column(String, nullable=False)
    country = Column(String, nullable=False)
    timezone = Column(String, nullable=False)


class Airline(Base):
    __tablename__ = "airlines"
    id = Column(Integer, primary_key=True)
    iata_code = Column(String, nullable=False, unique=True)
    name = Column(String, nullable=False, unique=True)
    country = Column(String, nullable=False)
    alliance = Column(String)
    loyalty_program_name = Column(String)


class Flight(Base):
    __tablename__ = "flights"
    id = Column(Integer, primary_key=True)
    airline_id = Column(Integer, ForeignKey("airlines.id"), nullable=False)
    flight_number = Column(String, nullable=False)
    origin_airport_id = Column(Integer, ForeignKey("airports.id"), nullable=False)
    destination_airport_id = Column(Integer, ForeignKey("airports.id"), nullable=False)
    departure_time = Column(String, nullable=False)
    arrival_time = Column(String, nullable=False)
    aircraft = Column(String)
    economy_fare = Column(Float, nullable=False)
    business_fare = Column(Float)
    seats_available = Column(Integer, nullable=False, default=0)
    status = Column(String, nullable=False, default="scheduled")
    airline = relationship("Airline")
    origin = relationship("Airport", foreign_keys=[origin_airport_id])
    destination = relationship("Airport", foreign_keys=[destination_airport_id])


class Hotel(Base):
    __tablename__ = "hotels"
    id = Column(Integer, primary_key=True)
    name = Column(String, nullable=False)
    city = Column(String, nullable=False)
    country = Column(String, nullable=False)
    address = Column(String, nullable=False)
    star_rating = Column(Integer, nullable=False)
    check_in_time = Column(String, nullable=False, default="15:00")
    check_out_time = Column(String, nullable=False, default="11:00")
    amenities = Column(String)
    rooms = relationship("HotelRoom", back_populates="hotel", order_by="HotelRoom.id")


class HotelRoom(Base):
    __tablename__ = "hotel_rooms"
    id = Column(Integer, primary_key=True)
    hotel_id = Column(Integer, ForeignKey("hotels.id"), nullable=False)
    room_type = Column(String, nullable=False)
    bed_type = Column(String, nullable=False)
    max_occupancy = Column(Integer, nullable=False)
    nightly_rate = Column(Float, nullable=False)
    total_rooms = Column(Integer, nullable=False)
    is_refundable = Column(Integer, nullable=False, default=1)
    hotel = relationship("Hotel", back_populates="rooms")


class Trip(Base):
    __tablename__ = "trips"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    name = Column(String, nullable=False)
    start_date = Column(String, nullable=False)
    end_date = Column(String, nullable=False)
    status = Column(String, nullable=False, default="planning")
    notes = Column(String)
    created_at = Column(String, nullable=False)


class FlightBooking(Base):
    __tablename__ = "flight_bookings"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    trip_id = Column(Integer, ForeignKey("trips.id"))
    flight_id = Column(Integer, ForeignKey("flights.id"), nullable=False)
    booking_reference = Column(String, nullable=False, unique=True)
    cabin_class = Column(String, nullable=False)
    status = Column(String, nullable=False, default="confirmed")
    total_price = Column(Float, nullable=False)
    currency = Column(String, nullable=False, default="USD")
    booked_at = Column(String, nullable=False)
    flight = relationship("Flight")
    passengers = relationship("Passenger", back_populates="booking", order_by="Passenger.id")


class Passenger(Base):
    __tablename__ = "passengers"
    id = Column(Integer, primary_key=True)
    booking_id = Column(Integer, ForeignKey("flight_bookings.id"), nullable=False)
    first_name = Column(String, nullable=False)
    last_name = Column(String, nullable=False)
    date_of_birth = Column(String, nullable=False)
    passport_number = Column(String)
    seat_number = Column(String)
    meal_preference = Column(String, nullable=False, default="standard")
    checked_bags = Column(Integer, nullable=False, default=0)
    booking = relationship("FlightBooking", back_populates="passengers")


class HotelReservation(Base):
    __tablename__ = "hotel_reservations"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    trip_id = Column(Integer, ForeignKey("trips.id"))
    room_id = Column(Integer, ForeignKey("hotel_rooms.id"), nullable=False)
    confirmation_code = Column(String, nullable=False, unique=True)
    check_in_date = Column(String, nullable=False)
    check_out_date = Column(String, nullable=False)
    num_guests = Column(Integer, nullable=False)
    num_rooms = Column(Integer, nullable=False, default=1)
    total_price = Column(Float, nullable=False)
    currency = Column(String, nullable=False, default="USD")
    status = Column(String, nullable=False, default="confirmed")
    special_requests = Column(String)
    created_at = Column(String, nullable=False)
    room = relationship("HotelRoom")


class Payment(Base):
    __tablename__ = "payments"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    flight_booking_id = Column(Integer, ForeignKey("flight_bookings.id"))
    hotel_reservation_id = Column(Integer, ForeignKey("hotel_reservations.id"))
    amount = Column(Float, nullable=False)
    currency = Column(String, nullable=False, default="USD")
    method = Column(String, nullable=False)
    status = Column(String, nullable=False, default="completed")
    paid_at = Column(String, nullable=False)


class LoyaltyAccount(Base):
    __tablename__ = "loyalty_accounts"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    airline_id = Column(Integer, ForeignKey("airlines.id"), nullable=False)
    membership_number = Column(String, nullable=False, unique=True)
    tier = Column(String, nullable=False, default="basic")
    points_balance = Column(Integer, nullable=False, default=0)
    joined_at = Column(String, nullable=False)
    airline = relationship("Airline")


Base.metadata.create_all(engine)

app = FastAPI(title="Skyway Travel Bookings API", version="1.0.0")


class AirportOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Airport id", examples=[1])
    iata_code: str = Field(..., description="Three-letter IATA airport code", examples=["SFO"])
    name: str = Field(..., description="Airport name", examples=["San Francisco International Airport"])
    city: str = Field(..., description="City served", examples=["San Francisco"])
    country: str = Field(..., description="Country", examples=["USA"])
    timezone: str = Field(..., description="IANA time zone of the airport", examples=["America/Los_Angeles"])


class AirlineOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Airline id", examples=[1])
    iata_code: str = Field(..., description="Two-letter airline code", examples=["AU"])
    name: str = Field(..., description="Airline name", examples=["Aurora Airways"])
    country: str = Field(..., description="Home country", examples=["USA"])
    alliance: Optional[str] = Field(None, description="Airline alliance", examples=["Skyline Alliance"])
    loyalty_program_name: Optional[str] = Field(None, description="Frequent-flyer program name", examples=["Aurora Miles"])


class FlightOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Flight id", examples=[7])
    airline_id: int = Field(..., description="Operating airline id", examples=[1])
    airline_name: str = Field(..., description="Operating airline name", examples=["Aurora Airways"])
    flight_number: str = Field(..., description="Flight number", examples=["AU482"])
    origin_code: str = Field(..., description="Origin airport IATA code", examples=["SFO"])
    origin_city: str = Field(..., description="Origin city", examples=["San Francisco"])
    destination_code: str = Field(..., description="Destination airport IATA code", examples=["LIS"])
    destination_city: str = Field(..., description="Destination city", examples=["Lisbon"])
    departure_time: str = Field(..., description="Local departure time", examples=["2026-05-12 16:05:00"])
    arrival_time: str = Field(..., description="Local arrival time", examples=["2026-05-13 11:30:00"])
    aircraft: Optional[str] = Field(None, description="Aircraft type", examples=["Boeing 787-9"])
    economy_fare: float = Field(..., description="Economy fare per passenger in USD", examples=[612.0])
    business_fare: Optional[float] = Field(None, description="Business fare per passenger in USD", examples=[2450.0])
    seats_available: int = Field(..., description="Seats still available", examples=[30])
    status: str = Field(..., description="Flight status", examples=["scheduled"])


class HotelRoomOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Room type id", examples=[6])
    hotel_id: int = Field(..., description="Hotel id", examples=[3])
    room_type: str = Field(..., description="Room type name", examples=["Superior Double"])
    bed_type: str = Field(..., description="Bed configuration", examples=["queen"])
    max_occupancy: int = Field(..., description="Maximum guests per room", examples=[2])
    nightly_rate: float = Field(..., description="Price per room per night in USD", examples=[189.0])
    total_rooms: int = Field(..., description="Number of rooms of this type in the hotel", examples=[8])
    is_refundable: bool = Field(..., description="Whether the rate is refundable", examples=[True])


class HotelOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Hotel id", examples=[3])
    name: str = Field(..., description="Hotel name", examples=["Casa Alfama Boutique Hotel"])
    city: str = Field(..., description="City", examples=["Lisbon"])
    country: str = Field(..., description="Country", examples=["Portugal"])
    address: str = Field(..., description="Street address", examples=["Rua de Sao Miguel 18, 1100-544 Lisbon"])
    star_rating: int = Field(..., description="Star rating 1-5", examples=[4])
    check_in_time: str = Field(..., description="Earliest check-in time", examples=["14:00"])
    check_out_time: str = Field(..., description="Latest check-out time", examples=["11:00"])
    amenities: Optional[str] = Field(None, description="Comma-separated amenities", examples=["wifi,breakfast"])


class HotelDetailOut(HotelOut):
    rooms: List[HotelRoomOut] = Field(default_factory=list, description="Room types offered by the hotel")


class TripOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Trip id", examples=[2])
    user_id: int = Field(..., description="Owner user id", examples=[1])
    name: str = Field(..., description="Trip name", examples=["Lisbon Spring Getaway"])
    start_date: str = Field(..., description="Start date (YYYY-MM-DD)", examples=["2026-05-12"])
    end_date: str = Field(..., description="End date (YYYY-MM-DD)", examples=["2026-05-20"])
    status: str = Field(..., description="planning, booked, completed or cancelled", examples=["planning"])
    notes: Optional[str] = Field(None, description="Free-text notes", examples=["Sintra day trip"])
    created_at: str = Field(..., description="Creation timestamp", examples=["2026-02-02 21:05:00"])


class PassengerOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Passenger id", examples=[2])
    booking_id: int = Field(..., description="Flight booking id", examples=[1])
    first_name: str = Field(..., description="First name", examples=["Daniel"])
    last_name: str = Field(..., description="Last name", examples=["Chen"])
    date_of_birth: str = Field(..., description="Date of birth (YYYY-MM-DD)", examples=["1988-09-02"])
    passport_number: Optional[str] = Field(None, description="Passport number", examples=["X7654321"])
    seat_number: Optional[str] = Field(None, description="Assigned seat", examples=["22B"])
    meal_preference: str = Field(..., description="Meal preference", examples=["standard"])
    checked_bags: int = Field(..., description="Number of checked bags", examples=[1])


class FlightBookingOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Flight booking id", examples=[1])
    user_id: int = Field(..., description="Owner user id", examples=[1])
    trip_id: Optional[int] = Field(None, description="Trip the booking belongs to", examples=[1])
    flight_id: int = Field(..., description="Booked flight id", examples=[1])
    booking_reference: str = Field(..., description="Six-character booking reference", examples=["QX7B2M"])
    cabin_class: str = Field(..., description="economy or business", examples=["economy"])
    status: str = Field(..., description="confirmed, checked_in, completed or cancelled", examples=["confirmed"])
    total_price: float = Field(..., description="Total price for all passengers", examples=[578.0])
    currency: str = Field(..., description="Currency code", examples=["USD"])
    booked_at: str = Field(..., description="Booking timestamp", examples=["2026-01-15 10:32:00"])
    flight_number: str = Field(..., description="Flight number", examples=["AU101"])
    airline_name: str = Field(..., description="Airline name", examples=["Aurora Airways"])
    origin_code: str = Field(..., description="Origin airport code", examples=["SFO"])
    destination_code: str = Field(..., description="Destination airport code", examples=["JFK"])
    departure_time: str = Field(..., description="Departure time", examples=["2026-04-10 08:15:00"])
    passenger_count: int = Field(..., description="Number of passengers", examples=[2])


class FlightBookingDetailOut(FlightBookingOut):
    passengers: List[PassengerOut] = Field(default_factory=list, description="Passengers on the booking")


class HotelReservationOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Reservation id", examples=[1])
    user_id: int = Field(..., description="Owner user id", examples=[1])
    trip_id: Optional[int] = Field(None, description="Trip the reservation belongs to", examples=[1])
    room_id: int = Field(..., description="Room type id", examples=[1])
    hotel_id: int = Field(..., description="Hotel id", examples=[1])
    hotel_name: str = Field(..., description="Hotel name", examples=["Grand Meridian Hotel"])
    hotel_city: str = Field(..., description="Hotel city", examples=["New York"])
    room_type: str = Field(..., description="Room type name", examples=["Deluxe King"])
    confirmation_code: str = Field(..., description="Reservation confirmation code", examples=["GMN-40217"])
    check_in_date: str = Field(..., description="Check-in date", examples=["2026-04-10"])
    check_out_date: str = Field(..., description="Check-out date", examples=["2026-04-14"])
    nights: int = Field(..., description="Number of nights", examples=[4])
    num_guests: int = Field(..., description="Number of guests", examples=[2])
    num_rooms: int = Field(..., description="Number of rooms", examples=[1])
    total_price: float = Field(..., description="Total price", examples=[1396.0])
    currency: str = Field(..., description="Currency code", examples=["USD"])
    status: str = Field(..., description="confirmed, completed or cancelled", examples=["confirmed"])
    special_requests: Optional[str] = Field(None, description="Special requests", examples=["High floor"])
    created_at: str = Field(..., description="Creation timestamp", examples=["2026-01-15 10:50:00"])
    amount_paid: float = Field(..., description="Sum of completed payments for this reservation", examples=[1396.0])


class TripDetailOut(TripOut):
    flight_bookings: List[FlightBookingOut] = Field(default_factory=list, description="Flight bookings in the trip")
    hotel_reservations: List[HotelReservationOut] = Field(default_factory=list, description="Hotel reservations in the trip")


class TripDeleteOut(BaseModel):
    id: int = Field(..., description="Deleted trip id", examples=[8])
    deleted: bool = Field(..., description="True when the trip was removed", examples=[True])
    detached_flight_bookings: int = Field(..., description="Flight bookings detached from the trip", examples=[0])
    detached_hotel_reservations: int = Field(..., description="Hotel reservations detached from the trip", examples=[0])


class PaymentOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Payment id", examples=[1])
    user_id: int = Field(..., description="Payer user id", examples=[1])
    flight_booking_id: Optional[int] = Field(None, description="Paid flight booking id", examples=[1])
    hotel_reservation_id: Optional[int] = Field(None, description="Paid hotel reservation id", examples=[None])
    amount: float = Field(..., description="Amount", examples=[578.0])
    currency: str = Field(..., description="Currency code", examples=["USD"])
    method: str = Field(..., description="card, paypal, bank_transfer or points", examples=["card"])
    status: str = Field(..., description="pending, completed, refunded or failed", examples=["completed"])
    paid_at: str = Field(..., description="Payment timestamp", examples=["2026-01-15 10:33:00"])


class LoyaltyAccountOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Loyalty account id", examples=[1])
    user_id: int = Field(..., description="Member user id", examples=[1])
    airline_id: int = Field(..., description="Airline id", examples=[1])
    airline_name: str = Field(..., description="Airline name", examples=["Aurora Airways"])
    program_name: Optional[str] = Field(None, description="Loyalty program name", examples=["Aurora Miles"])
    membership_number: str = Field(..., description="Membership number", examples=["AUR-1100482"])
    tier: str = Field(..., description="basic, silver, gold or platinum", examples=["gold"])
    points_balance: int = Field(..., description="Current points balance", examples=[48250])
    joined_at: str = Field(..., description="Join timestamp", examples=["2019-04-02 10:00:00"])


class TripCreate(BaseModel):
    name: str = Field(..., description="Trip name", examples=["Kyoto Autumn Escape"])
    start_date: str = Field(..., description="Start date (YYYY-MM-DD)", examples=["2026-10-03"])
    end_date: str = Field(..., description="End date (YYYY-MM-DD)", examples=["2026-10-12"])
    notes: Optional[str] = Field(None, description="Free-text notes", examples=["Temple visits"])
    status: str = Field("planning", description="planning, booked, completed or cancelled", examples=["planning"])


class TripUpdate(BaseModel):
    name: Optional[str] = Field(None, description="New trip name", examples=["Chicago Family Reunion"])
    start_date: Optional[str] = Field(None, description="New start date (YYYY-MM-DD)", examples=["2026-07-11"])
    end_date: Optional[str] = Field(None, description="New end date (YYYY-MM-DD)", examples=["2026-07-20"])
    status: Optional[str] = Field(None, description="New status", examples=["booked"])
    notes: Optional[str] = Field(None, description="New notes", examples=["Bring gifts"])


class FlightBookingCreate(BaseModel):
    flight_id: int = Field(..., description="Id of the flight to book", examples=[7])
    cabin_class: str = Field("economy", description="economy or business", examples=["economy"])
    trip_id: Optional[int] = Field(None, description="Trip to attach the booking to", examples=[2])
    passenger_first_name: str = Field(..., description="First passenger's first name", examples=["Maya"])
    passenger_last_name: str = Field(..., description="First passenger's last name", examples=["Chen"])
    passenger_date_of_birth: str = Field(..., description="First passenger's date of birth (YYYY-MM-DD)", examples=["1990-06-14"])
    passport_number: Optional[str] = Field(None, description="First passenger's passport number", examples=["X1234567"])
    seat_number: Optional[str] = Field(None, description="Requested seat", examples=["21A"])
    meal_preference: str = Field("standard", description="standard, vegetarian, vegan, halal, kosher, gluten_free or child", examples=["standard"])
    checked_bags: int = Field(0, description="Checked bags for the first passenger", examples=[1])


class PassengerCreate(BaseModel):
    first_name: str = Field(..., description="First name", examples=["Leo"])
    last_name: str = Field(..., description="Last name", examples=["Chen"])
    date_of_birth: str = Field(..., description="Date of birth (YYYY-MM-DD)", examples=["2015-09-03"])
    passport_number: Optional[str] = Field(None, description="Passport number", examples=["X2468135"])
    seat_number: Optional[str] = Field(None, description="Requested seat", examples=["12C"])
    meal_preference: str = Field("standard", description="standard, vegetarian, vegan, halal, kosher, gluten_free or child", examples=["child"])
    checked_bags: int = Field(0, description="Checked bags", examples=[0])


class PassengerUpdate(BaseModel):
    seat_number: Optional[str] = Field(None, description="New seat", examples=["14C"])
    meal_preference: Optional[str] = Field(None, description="New meal preference", examples=["vegetarian"])
    checked_bags: Optional[int] = Field(None, description="New number of checked bags", examples=[2])
    passport_number: Optional[str] = Field(None, description="New passport number", examples=["X7654321"])


class HotelReservationCreate(BaseModel):
    room_id: int = Field(..., description="Room type id to reserve", examples=[6])
    check_in_date: str = Field(..., description="Check-in date (YYYY-MM-DD)", examples=["2026-05-12"])
    check_out_date: str = Field(..., description="Check-out date (YYYY-MM-DD)", examples=["2026-05-15"])
    num_guests: int = Field(..., description="Number of guests", examples=[2])
    num_rooms: int = Field(1, description="Number of rooms", examples=[1])
    trip_id: Optional[int] = Field(None, description="Trip to attach the reservation to", examples=[2])
    special_requests: Optional[str] = Field(None, description="Special requests", examples=["Quiet room"])


class PaymentCreate(BaseModel):
    method: str = Field(..., description="card, paypal, bank_transfer or points", examples=["paypal"])
    flight_booking_id: Optional[int] = Field(None, description="Flight booking to pay", examples=[None])
    hotel_reservation_id: Optional[int] = Field(None, description="Hotel reservation to pay", examples=[2])


def _now():
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S")


def _flight_out(f):
    return FlightOut(
        id=f.id,
        airline_id=f.airline_id,
        airline_name=f.airline.name,
        flight_number=f.flight_number,
        origin_code=f.origin.iata_code,
        origin_city=f.origin.city,
        destination_code=f.destination.iata_code,
        destination_city=f.destination.city,
        departure_time=f.departure_time,
        arrival_time=f.arrival_time,
        aircraft=f.aircraft,
        economy_fare=f.economy_fare,
        business_fare=f.business_fare,
        seats_available=f.seats_available,
        status=f.status,
    )


def _booking_fields(b):
    return dict(
        id=b.id,
        user_id=b.user_id,
        trip_id=b.trip_id,
        flight_id=b.flight_id,
        booking_reference=b.booking_reference,
        cabin_class=b.cabin_class,
        status=b.status,
        total_price=b.total_price,
        currency=b.currency,
        booked_at=b.booked_at,
        flight_number=b.flight.flight_number,
        airline_name=b.flight.airline.name,
        origin_code=b.flight.origin.iata_code,
        destination_code=b.flight.destination.iata_code,
        departure_time=b.flight.departure_time,
        passenger_count=len(b.passengers),
    )


def _booking_out(b):
    return FlightBookingOut(**_booking_fields(b))


def _booking_detail_out(b):
    return FlightBookingDetailOut(**_booking_fields(b), passengers=[PassengerOut.model_validate(p) for p in b.passengers])


def _reservation_out(session, r):
    paid = sum(p.amount for p in session.query(Payment).filter(Payment.hotel_reservation_id == r.id, Payment.status == "completed").all())
    nights = (date.fromisoformat(r.check_out_date) - date.fromisoformat(r.check_in_date)).days
    return HotelReservationOut(
        id=r.id,
        user_id=r.user_id,
        trip_id=r.trip_id,
        room_id=r.room_id,
        hotel_id=r.room.hotel_id,
        hotel_name=r.room.hotel.name,
        hotel_city=r.room.hotel.city,
        room_type=r.room.room_type,
        confirmation_code=r.confirmation_code,
        check_in_date=r.check_in_date,
        check_out_date=r.check_out_date,
        nights=nights,
        num_guests=r.num_guests,
        num_rooms=r.num_rooms,
        total_price=r.total_price,
        currency=r.currency,
        status=r.status,
        special_requests=r.special_requests,
        created_at=r.created_at,
        amount_paid=round(paid, 2),
    )


def _loyalty_out(a):
    return LoyaltyAccountOut(
        id=a.id,
        user_id=a.user_id,
        airline_id=a.airline_id,
        airline_name=a.airline.name,
        program_name=a.airline.loyalty_program_name,
        membership_number=a.membership_number,
        tier=a.tier,
        points_balance=a.points_balance,
        joined_at=a.joined_at,
    )


@app.get("/api/airports", summary="List airports", description="List airports, optionally filtered by code, name or city text and by country.", tags=["catalog"], operation_id="list_airports", response_model=List[AirportOut])
async def list_airports(q: Optional[str] = Query(None, description="Text matched against IATA code, airport name or city"), country: Optional[str] = Query(None, description="Country filter")):
    session = SessionLocal()
    query = session.query(Airport)
    if q:
        like = f"%{q}%"
        query = query.filter(or_(Airport.iata_code.ilike(like), Airport.name.ilike(like), Airport.city.ilike(like)))
    if country:
        query = query.filter(Airport.country.ilike(f"%{country}%"))
    result = [AirportOut.model_validate(a) for a in query.order_by(Airport.iata_code).all()]
    session.close()
    return result


@app.get("/api/airlines", summary="List airlines", description="List airlines, optionally filtered by name or code text.", tags=["catalog"], operation_id="list_airlines", response_model=List[AirlineOut])
async def list_airlines(q: Optional[str] = Query(None, description="Text matched against airline name or IATA code")):
    session = SessionLocal()
    query = session.query(Airline)
    if q:
        like = f"%{q}%"
        query = query.filter(or_(Airline.name.ilike(like), Airline.iata_code.ilike(like)))
    result = [AirlineOut.model_validate(a) for a in query.order_by(Airline.name).all()]
    session.close()
    return result


@app.get("/api/flights", summary="Search flights", description="Search flights by origin, destination, date, airline, flight number and maximum economy fare.", tags=["flights"], operation_id="search_flights", response_model=List[FlightOut])
async def search_flights(
    origin: Optional[str] = Query(None, description="Origin airport IATA code or city"),
    destination: Optional[str] = Query(None, description="Destination airport IATA code or city"),
    departure_date: Optional[str] = Query(None, description="Departure date YYYY-MM-DD"),
    airline: Optional[str] = Query(None, description="Airline name or code"),
    flight_number: Optional[str] = Query(None, description="Flight number such as AU482"),
    max_economy_fare: Optional[float] = Query(None, description="Maximum economy fare in USD"),
    status: Optional[str] = Query(None, description="Flight status filter"),
    sort_by: Optional[str] = Query("departure_time", description="departure_time or economy_fare"),
):
    session = SessionLocal()
    flights = session.query(Flight).all()
    result = []
    for f in flights:
        if origin and origin.lower() not in (f.origin.iata_code.lower(), f.origin.city.lower()):
            continue
        if destination and destination.lower() not in (f.destination.iata_code.lower(), f.destination.city.lower()):
            continue
        if departure_date and not f.departure_time.startswith(departure_date):
            continue
        if airline and airline.lower() not in f.airline.name.lower() and airline.lower() != f.airline.iata_code.lower():
            continue
        if flight_number and flight_number.replace(" ", "").lower() != f.flight_number.lower():
            continue
        if max_economy_fare is not None and f.economy_fare > max_economy_fare:
            continue
        if status and f.status != status:
            continue
        result.append(_flight_out(f))
    if sort_by == "economy_fare":
        result.sort(key=lambda x: x.economy_fare)
    else:
        result.sort(key=lambda x: x.departure_time)
    session.close()
    return result


@app.get("/api/flights/{flight_id}", summary="Get flight", description="Get one flight with fares, seats and status.", tags=["flights"], operation_id="get_flight", response_model=FlightOut)
async def get_flight(flight_id: int):
    session = SessionLocal()
    f = session.query(Flight).filter(Flight.id == flight_id).first()
    result = _flight_out(f)
    session.close()
    return result


@app.get("/api/hotels", summary="Search hotels", description="Search hotels by city, name text and minimum star rating.", tags=["hotels"], operation_id="search_hotels", response_model=List[HotelOut])
async def search_hotels(city: Optional[str] = Query(None, description="City name"), q: Optional[str] = Query(None, description="Text matched against the hotel name"), min_stars: Optional[int] = Query(None, description="Minimum star rating")):
    session = SessionLocal()
    query = session.query(Hotel)
    if city:
        query = query.filter(Hotel.city.ilike(f"%{city}%"))
    if q:
        query = query.filter(Hotel.name.ilike(f"%{q}%"))
    if min_stars is not None:
        query = query.filter(Hotel.star_rating >= min_stars)
    result = [HotelOut.model_validate(h) for h in query.order_by(Hotel.name).all()]
    session.close()
    return result


@app.get("/api/hotels/{hotel_id}", summary="Get hotel with rooms", description="Get one hotel with all of its room types and nightly rates.", tags=["hotels"], operation_id="get_hotel", response_model=HotelDetailOut)
async def get_hotel(hotel_id: int):
    session = SessionLocal()
    h = session.query(Hotel).filter(Hotel.id == hotel_id).first()
    result = HotelDetailOut(**HotelOut.model_validate(h).model_dump(), rooms=[HotelRoomOut.model_validate(r) for r in h.rooms])
    session.close()
    return result


@app.get("/api/trips", summary="List my trips", description="List the current user's trips, optionally filtered by name text and status.", tags=["trips"], operation_id="list_my_trips", response_model=List[TripOut])
async def list_my_trips(q: Optional[str] = Query(None, description="Text matched against the trip name"), status: Optional[str] = Query(None, description="planning, booked, completed or cancelled")):
    user_id = 1
    session = SessionLocal()
    query = session.query(Trip).filter(Trip.user_id == user_id)
    if q:
        query = query.filter(Trip.name.ilike(f"%{q}%"))
    if status:
        query = query.filter(Trip.status == status)
    result = [TripOut.model_validate(t) for t in query.order_by(Trip.start_date).all()]
    session.close()
    return result


@app.get("/api/trips/{trip_id}", summary="Get trip itinerary", description="Get one of my trips with its flight bookings and hotel reservations.", tags=["trips"], operation_id="get_trip", response_model=TripDetailOut)
async def get_trip(trip_id: int):
    user_id = 1
    session = SessionLocal()
    t = session.query(Trip).filter(Trip.id == trip_id, Trip.user_id == user_id).first()
    bookings = session.query(FlightBooking).filter(FlightBooking.trip_id == t.id).order_by(FlightBooking.id).all()
    reservations = session.query(HotelReservation).filter(HotelReservation.trip_id == t.id).order_by(HotelReservation.id).all()
    result = TripDetailOut(
        **TripOut.model_validate(t).model_dump(),
        flight_bookings=[_booking_out(b) for b in bookings],
        hotel_reservations=[_reservation_out(session, r) for r in reservations],
    )
    session.close()
    return result


@app.post("/api/trips", summary="Create trip", description="Create a new trip itinerary for the current user.", tags=["trips"], operation_id="create_trip", response_model=TripOut)
async def create_trip(body: TripCreate):
    user_id = 1
    session = SessionLocal()
    t = Trip(user_id=user_id, name=body.name, start_date=body.start_date, end_date=body.end_date, status=body.status, notes=body.notes, created_at=_now())
    session.add(t)
    session.commit()
    session.refresh(t)
    result = TripOut.model_validate(t)
    session.close()
    return result


@app.patch("/api/trips/{trip_id}", summary="Update trip", description="Update the name, dates, status or notes of one of my trips.", tags=["trips"], operation_id="update_trip", response_model=TripOut)
async def update_trip(trip_id: int, body: TripUpdate):
    user_id = 1
    session = SessionLocal()
    t = session.query(Trip).filter(Trip.id == trip_id, Trip.user_id == user_id).first()
    for key, value in body.model_dump(exclude_unset=True).items():
        if value is not None:
            setattr(t, key, value)
    session.commit()
    session.refresh(t)
    result = TripOut.model_validate(t)
    session.close()
    return result


@app.delete("/api/trips/{trip_id}", summary="Delete trip", description="Delete one of my trips; its bookings and reservations are kept but detached.", tags=["trips"], operation_id="delete_trip", response_model=TripDeleteOut)
async def delete_trip(trip_id: int):
    user_id = 1
    session = SessionLocal()
    t = session.query(Trip).filter(Trip.id == trip_id, Trip.user_id == user_id).first()
    bookings = session.query(FlightBooking).filter(FlightBooking.trip_id == t.id).all()
    reservations = session.query(HotelReservation).filter(HotelReservation.trip_id == t.id).all()
    for b in bookings:
        b.trip_id = None
    for r in reservations:
        r.trip_id = None
    session.delete(t)
    session.commit()
    result = TripDeleteOut(id=trip_id, deleted=True, detached_flight_bookings=len(bookings), detached_hotel_reservations=len(reservations))
    session.close()
    return result


@app.get("/api/flight-bookings", summary="List my flight bookings", description="List my flight bookings filtered by status, trip, booking reference or flight number.", tags=["flight bookings"], operation_id="list_my_flight_bookings", response_model=List[FlightBookingOut])
async def list_my_flight_bookings(
    status: Optional[str] = Query(None, description="confirmed, checked_in, completed or cancelled"),
    trip_id: Optional[int] = Query(None, description="Trip id"),
    booking_reference: Optional[str] = Query(None, description="Booking reference such as QX7B2M"),
    flight_number: Optional[str] = Query(None, description="Flight number such as NW310"),
):
    user_id = 1
    session = SessionLocal()
    query = session.query(FlightBooking).filter(FlightBooking.user_id == user_id)
    if status:
        query = query.filter(FlightBooking.status == status)
    if trip_id is not None:
        query = query.filter(FlightBooking.trip_id == trip_id)
    if booking_reference:
        query = query.filter(FlightBooking.booking_reference.ilike(booking_reference.strip()))
    bookings = query.order_by(FlightBooking.id).all()
    if flight_number:
        bookings = [b for b in bookings if b.flight.flight_number.lower() == flight_number.replace(" ", "").lower()]
    result = [_booking_out(b) for b in bookings]
    session.close()
    return result


@app.get("/api/flight-bookings/{booking_id}", summary="Get flight booking", description="Get one of my flight bookings with its passengers.", tags=["flight bookings"], operation_id="get_flight_booking", response_model=FlightBookingDetailOut)
async def get_flight_booking(booking_id: int):
    user_id = 1
    session = SessionLocal()
    b = session.query(FlightBooking).filter(FlightBooking.id == booking_id, FlightBooking.user_id == user_id).first()
    result = _booking_detail_out(b)
    session.close()
    return result


@app.post("/api/flight-bookings", summary="Book a flight", description="Book a flight for one passenger in the chosen cabin, optionally attached to a trip.", tags=["flight bookings"], operation_id="create_flight_booking", response_model=FlightBookingDetailOut)
async def create_flight_booking(body: FlightBookingCreate):
    user_id = 1
    session = SessionLocal()
    f = session.query(Flight).filter(Flight.id == body.flight_id).first()
    fare = f.business_fare if body.cabin_class == "business" else f.economy_fare
    b = FlightBooking(user_id=user_id, trip_id=body.trip_id, flight_id=f.id, booking_reference="PENDING-" + _now(), cabin_class=body.cabin_class, status="confirmed", total_price=round(fare, 2), currency="USD", booked_at=_now())
    session.add(b)
    session.flush()
    b.booking_reference = f"SK{b.id:04d}"
    session.add(Passenger(booking_id=b.id, first_name=body.passenger_first_name, last_name=body.passenger_last_name, date_of_birth=body.passenger_date_of_birth, passport_number=body.passport_number, seat_number=body.seat_number, meal_preference=body.meal_preference, checked_bags=body.checked_bags))
    f.seats_available = f.seats_available - 1
    session.commit()
    session.refresh(b)
    result = _booking_detail_out(b)
    session.close()
    return result


@app.post("/api/flight-bookings/{booking_id}/passengers", summary="Add passenger to booking", description="Add another passenger to one of my flight bookings; the fare is added to the total price.", tags=["flight bookings"], operation_id="add_passenger_to_booking", response_model=FlightBookingDetailOut)
async def add_passenger_to_booking(booking_id: int, body: PassengerCreate):
    user_id = 1
    session = SessionLocal()
    b = session.query(FlightBooking).filter(FlightBooking.id == booking_id, FlightBooking.user_id == user_id).first()
    f = b.flight
    fare = f.business_fare if b.cabin_class == "business" else f.economy_fare
    session.add(Passenger(booking_id=b.id, first_name=body.first_name, last_name=body.last_name, date_of_birth=body.date_of_birth, passport_number=body.passport_number, seat_number=body.seat_number, meal_preference=body.meal_preference, checked_bags=body.checked_bags))
    b.total_price = round(b.total_price + fare, 2)
    f.seats_available = f.seats_available - 1
    session.commit()
    session.refresh(b)
    result = _booking_detail_out(b)
    session.close()
    return result


@app.patch("/api/passengers/{passenger_id}", summary="Update passenger", description="Change the seat, meal preference, checked bags or passport of a passenger on my booking.", tags=["flight bookings"], operation_id="update_passenger", response_model=PassengerOut)
async def update_passenger(passenger_id: int, body: PassengerUpdate):
    user_id = 1
    session = SessionLocal()
    p = session.query(Passenger).join(FlightBooking, Passenger.booking_id == FlightBooking.id).filter(Passenger.id == passenger_id, FlightBooking.user_id == user_id).first()
    for key, value in body.model_dump(exclude_unset=True).items():
        if value is not None:
            setattr(p, key, value)
    session.commit()
    session.refresh(p)
    result = PassengerOut.model_validate(p)
    session.close()
    return result


@app.post("/api/flight-bookings/{booking_id}/cancel", summary="Cancel flight booking", description="Cancel one of my flight bookings, release its seats and refund its payments.", tags=["flight bookings"], operation_id="cancel_flight_booking", response_model=FlightBookingOut)
async def cancel_flight_booking(booking_id: int):
    user_id = 1
    session = SessionLocal()
    b = session.query(FlightBooking).filter(FlightBooking.id == booking_id, FlightBooking.user_id == user_id).first()
    if b.status != "cancelled":
        b.flight.seats_available = b.flight.seats_available + len(b.passengers)
        for p in session.query(Payment).filter(Payment.flight_booking_id == b.id, Payment.status == "completed").all():
            p.status = "refunded"
    b.status = "cancelled"
    session.commit()
    session.refresh(b)
    result = _booking_out(b)
    session.close()
    return result


@app.get("/api/hotel-reservations", summary="List my hotel reservations", description="List my hotel reservations filtered by hotel name, city, status, trip or confirmation code.", tags=["hotel reservations"], operation_id="list_my_hotel_reservations", response_model=List[HotelReservationOut])
async def list_my_hotel_reservations(
    hotel_name: Optional[str] = Query(None, description="Text matched against the hotel name"),
    city: Optional[str] = Query(None, description="Hotel city"),
    status: Optional[str] = Query(None, description="confirmed, completed or cancelled"),
    trip_id: Optional[int] = Query(None, description="Trip id"),
    confirmation_code: Optional[str] = Query(None, description="Confirmation code"),
):
    user_id = 1
    session = SessionLocal()
    query = session.query(HotelReservation).filter(HotelReservation.user_id == user_id)
    if status:
        query = query.filter(HotelReservation.status == status)
    if trip_id is not None:
        query = query.filter(HotelReservation.trip_id == trip_id)
    if confirmation_code:
        query = query.filter(HotelReservation.confirmation_code.ilike(confirmation_code.strip()))
    reservations = query.order_by(HotelReservation.check_in_date).all()
    if hotel_name:
        reservations = [r for r in reservations if hotel_name.lower() in r.room.hotel.name.lower()]
    if city:
        reservations = [r for r in reservations if city.lower() in r.room.hotel.city.lower()]
    result = [_reservation_out(session, r) for r in reservations]
    session.close()
    return result


@app.post("/api/hotel-reservations", summary="Reserve hotel room", description="Reserve a hotel room type for a date range; the price is nights x nightly rate x rooms.", tags=["hotel reservations"], operation_id="create_hotel_reservation", response_model=HotelReservationOut)
async def create_hotel_reservation(body: HotelReservationCreate):
    user_id = 1
    session = SessionLocal()
    room = session.query(HotelRoom).filter(HotelRoom.id == body.room_id).first()
    nights = (date.fromisoformat(body.check_out_date) - date.fromisoformat(body.check_in_date)).days
    r = HotelReservation(user_id=user_id, trip_id=body.trip_id, room_id=room.id, confirmation_code="PENDING-" + _now(), check_in_date=body.check_in_date, check_out_date=body.check_out_date, num_guests=body.num_guests, num_rooms=body.num_rooms, total_price=round(nights * room.nightly_rate * body.num_rooms, 2), currency="USD", status="confirmed", special_requests=body.special_requests, created_at=_now())
    session.add(r)
    session.flush()
    r.confirmation_code = f"SKH-{r.id:05d}"
    session.commit()
    session.refresh(r)
    result = _reservation_out(session, r)
    session.close()
    return result


@app.post("/api/hotel-reservations/{reservation_id}/cancel", summary="Cancel hotel reservation", description="Cancel one of my hotel reservations and refund its payments.", tags=["hotel reservations"], operation_id="cancel_hotel_reservation", response_model=HotelReservationOut)
async def cancel_hotel_reservation(reservation_id: int):
    user_id = 1
    session = SessionLocal()
    r = session.query(HotelReservation).filter(HotelReservation.id == reservation_id, HotelReservation.user_id == user_id).first()
    for p in session.query(Payment).filter(Payment.hotel_reservation_id == r.id, Payment.status == "completed").all():
        p.status = "refunded"
    r.status = "cancelled"
    session.commit()
    session.refresh(r)
    result = _reservation_out(session, r)
    session.close()
    return result


@app.get("/api/payments", summary="List my payments", description="List my payments, optionally for one flight booking or hotel reservation or by status.", tags=["payments"], operation_id="list_my_payments", response_model=List[PaymentOut])
async def list_my_payments(flight_booking_id: Optional[int] = Query(None, description="Flight booking id"), hotel_reservation_id: Optional[int] = Query(None, description="Hotel reservation id"), status: Optional[str] = Query(None, description="pending, completed, refunded or failed")):
    user_id = 1
    session = SessionLocal()
    query = session.query(Payment).filter(Payment.user_id == user_id)
    if flight_booking_id is not None:
        query = query.filter(Payment.flight_booking_id == flight_booking_id)
    if hotel_reservation_id is not None:
        query = query.filter(Payment.hotel_reservation_id == hotel_reservation_id)
    if status:
        query = query.filter(Payment.status == status)
    result = [PaymentOut.model_validate(p) for p in query.order_by(Payment.paid_at).all()]
    session.close()
    return result


@app.post("/api/payments", summary="Pay for a booking", description="Pay the full total of one of my flight bookings or hotel reservations.", tags=["payments"], operation_id="create_payment", response_model=PaymentOut)
async def create_payment(body: PaymentCreate):
    user_id = 1
    session = SessionLocal()
    if body.hotel_reservation_id is not None:
        target = session.query(HotelReservation).filter(HotelReservation.id == body.hotel_reservation_id, HotelReservation.user_id == user_id).first()
    else:
        target = session.query(FlightBooking).filter(FlightBooking.id == body.flight_booking_id, FlightBooking.user_id == user_id).first()
    p = Payment(user_id=user_id, flight_booking_id=body.flight_booking_id if body.hotel_reservation_id is None else None, hotel_reservation_id=body.hotel_reservation_id, amount=target.total_price, currency=target.currency, method=body.method, status="completed", paid_at=_now())
    session.add(p)
    session.commit()
    session.refresh(p)
    result = PaymentOut.model_validate(p)
    session.close()
    return result


@app.get("/api/loyalty-accounts", summary="List my loyalty accounts", description="List my airline loyalty accounts with tier and points balance, optionally for one airline.", tags=["loyalty"], operation_id="list_my_loyalty_accounts", response_model=List[LoyaltyAccountOut])
async def list_my_loyalty_accounts(airline: Optional[str] = Query(None, description="Airline name or code")):
    user_id = 1
    session = SessionLocal()
    accounts = session.query(LoyaltyAccount).filter(LoyaltyAccount.user_id == user_id).order_by(LoyaltyAccount.id).all()
    if airline:
        accounts = [a for a in accounts if airline.lower() in a.airline.name.lower() or airline.lower() == a.airline.iata_code.lower()]
    result = [_loyalty_out(a) for a in accounts]
    session.close()
    return result


if __name__ == "__main__":
    import uvicorn
    host = os.getenv("HOST", "127.0.0.1")
    port = int(os.getenv("PORT", "8000"))
    uvicorn.run(app, host=host, port=port)
