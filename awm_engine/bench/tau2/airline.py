"""The airline domain's tools (spec §3.1): 14 tools over ``FlightDB``, with τ²-bench's effects, errors and quirks:
fixed new reservation ids (HATHAT, HATHAU, HATHAV) and creation time, used certificates deleted when booking,
no seat release on cancellation, no seat change when flights are updated, and the payment-difference rules."""
from __future__ import annotations

from copy import deepcopy
from typing import Any

from awm_engine.bench.tau2.models import (
    AirportCode,
    Certificate,
    DirectFlight,
    FlightDateStatusAvailable,
    FlightInfo,
    Passenger,
    Payment,
    Reservation,
    ReservationFlight,
)
from awm_engine.bench.tau2.toolkit import (
    CALCULATE_DESCRIPTION,
    CALCULATE_PARAMS,
    TRANSFER_DESCRIPTION,
    TRANSFER_PARAMS,
    Toolkit,
    ToolType,
    array,
    calculate_expression,
    integer,
    obj,
    string,
    tool,
)

NEW_RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
NEW_CERTIFICATE_NUMBERS = (3221322, 3221323, 3221324)
NOW = "2024-05-15T15:00:00"
AIRPORTS = [("SFO", "San Francisco"), ("JFK", "New York"), ("LAX", "Los Angeles"), ("ORD", "Chicago"),
            ("DFW", "Dallas"), ("DEN", "Denver"), ("SEA", "Seattle"), ("ATL", "Atlanta"), ("MIA", "Miami"),
            ("BOS", "Boston"), ("PHX", "Phoenix"), ("IAH", "Houston"), ("LAS", "Las Vegas"), ("MCO", "Orlando"),
            ("EWR", "Newark"), ("CLT", "Charlotte"), ("MSP", "Minneapolis"), ("DTW", "Detroit"),
            ("PHL", "Philadelphia"), ("LGA", "LaGuardia")]

_RESERVATION_ID = string("The six-character reservation code, for example 'ZFA04Y'.")
_USER_ID = string("The customer's user id, for example 'sara_doe_496'.")
_CABIN = {"type": "string", "enum": ["basic_economy", "economy", "business"], "description": "The cabin class."}
_FLIGHTS = array("Every flight segment, each with its flight number and date.",
                 obj("A flight segment.", {"flight_number": string("The flight number, for example 'HAT001'."),
                                           "date": string("The date of the flight, YYYY-MM-DD.")}))
_PASSENGERS = array("The passengers, each with first name, last name and date of birth.",
                    obj("A passenger.", {"first_name": string("First name."), "last_name": string("Last name."),
                                         "dob": string("Date of birth, YYYY-MM-DD.")}))
_PAYMENT_ID = string("The id of a payment method saved in the customer's profile, for example "
                     "'credit_card_7815826' or 'gift_card_7815826'.")
_AIRPORT = string("A three-letter IATA airport code, for example 'JFK'.")


class AirlineTools(Toolkit):
    """All the tools of the airline domain."""

    # -- lookups ------------------------------------------------------------------------------------
    def _get_user(self, user_id: str):
        if user_id not in self.db.users:
            raise ValueError(f"User {user_id} not found")
        return self.db.users[user_id]

    def _get_reservation(self, reservation_id: str):
        if reservation_id not in self.db.reservations:
            raise ValueError(f"Reservation {reservation_id} not found")
        return self.db.reservations[reservation_id]

    def _get_flight(self, flight_number: str):
        if flight_number not in self.db.flights:
            raise ValueError(f"Flight {flight_number} not found")
        return self.db.flights[flight_number]

    def _get_flight_instance(self, flight_number: str, date: str):
        flight = self._get_flight(flight_number)
        if date not in flight.dates:
            raise ValueError(f"Flight {flight_number} not found on date {date}")
        return flight.dates[date]

    def _get_new_reservation_id(self) -> str:
        for reservation_id in NEW_RESERVATION_IDS:
            if reservation_id not in self.db.reservations:
                return reservation_id
        raise ValueError("Too many reservations")

    def _search_direct_flight(self, date: str, origin: str | None = None, destination: str | None = None,
                              leave_after: str | None = None) -> list[DirectFlight]:
        results = []
        for flight in self.db.flights.values():
            if ((origin is None or flight.origin == origin)
                    and (destination is None or flight.destination == destination)
                    and date in flight.dates and flight.dates[date].status == "available"
                    and (leave_after is None or flight.scheduled_departure_time_est >= leave_after)):
                results.append(DirectFlight(
                    flight_number=flight.flight_number, origin=flight.origin, destination=flight.destination,
                    status="available", scheduled_departure_time_est=flight.scheduled_departure_time_est,
                    scheduled_arrival_time_est=flight.scheduled_arrival_time_est,
                    available_seats=flight.dates[date].available_seats, prices=flight.dates[date].prices))
        return results

    def _payment_for_update(self, user, payment_id: str, total_price: Any) -> Payment | None:
        """Charge (or, negative, refund) ``total_price`` to a saved method: certificates refused, gift cards must
        cover it and are debited; a payment entry when the amount is not zero."""
        if payment_id not in user.payment_methods:
            raise ValueError("Payment method not found")
        method = user.payment_methods[payment_id]
        if method.source == "certificate":
            raise ValueError("Certificate cannot be used to update reservation")
        if method.source == "gift_card" and method.amount < total_price:
            raise ValueError("Gift card balance is not enough")
        if method.source == "gift_card":
            method.amount -= total_price
        return Payment(payment_id=payment_id, amount=total_price) if total_price != 0 else None

    # -- tools --------------------------------------------------------------------------------------
    @tool(ToolType.WRITE, "Book a new reservation for a customer. The price is the cabin fare of every flight for "
          "every passenger, plus 30 per passenger with travel insurance, plus 50 per non-free checked bag; the "
          "payments must add up to exactly that amount.",
          user_id=_USER_ID, origin=_AIRPORT, destination=_AIRPORT,
          flight_type={"type": "string", "enum": ["one_way", "round_trip"], "description": "One way or round trip."},
          cabin=_CABIN, flights=_FLIGHTS, passengers=_PASSENGERS,
          payment_methods=array("How the reservation is paid: saved payment method ids with the amount charged to "
                                "each.", obj("A payment.", {"payment_id": _PAYMENT_ID,
                                                            "amount": integer("The amount charged to it.")})),
          total_baggages=integer("The total number of checked bags."),
          nonfree_baggages=integer("How many of the checked bags are paid for."),
          insurance={"type": "string", "enum": ["yes", "no"], "description": "Whether travel insurance is bought."})
    def book_reservation(self, user_id: str, origin: str, destination: str, flight_type: str, cabin: str,
                         flights: list, passengers: list, payment_methods: list, total_baggages: int,
                         nonfree_baggages: int, insurance: str) -> Reservation:
        if all(isinstance(f, dict) for f in flights):
            flights = [FlightInfo(**f) for f in flights]
        if all(isinstance(p, dict) for p in passengers):
            passengers = [Passenger(**p) for p in passengers]
        if all(isinstance(p, dict) for p in payment_methods):
            payment_methods = [Payment(**p) for p in payment_methods]
        user = self._get_user(user_id)
        reservation_id = self._get_new_reservation_id()
        reservation = Reservation(
            reservation_id=reservation_id, user_id=user_id, origin=origin, destination=destination,
            flight_type=flight_type, cabin=cabin, flights=[], passengers=deepcopy(passengers),
            payment_history=deepcopy(payment_methods), created_at=NOW, total_baggages=total_baggages,
            nonfree_baggages=nonfree_baggages, insurance=insurance)
        total_price = 0
        instances = []
        for info in flights:
            flight = self._get_flight(info.flight_number)
            instance = self._get_flight_instance(info.flight_number, info.date)
            if not isinstance(instance, FlightDateStatusAvailable):
                raise ValueError(f"Flight {info.flight_number} not available on date {info.date}")
            if instance.available_seats[cabin] < len(passengers):
                raise ValueError(f"Not enough seats on flight {info.flight_number}")
            price = instance.prices[cabin]
            reservation.flights.append(ReservationFlight(origin=flight.origin, destination=flight.destination,
                                                         flight_number=info.flight_number, date=info.date,
                                                         price=price))
            instances.append(instance)
            total_price += price * len(passengers)
        if insurance == "yes":
            total_price += 30 * len(passengers)
        total_price += 50 * nonfree_baggages
        for payment in payment_methods:
            if payment.payment_id not in user.payment_methods:
                raise ValueError(f"Payment method {payment.payment_id} not found")
            method = user.payment_methods[payment.payment_id]
            if method.source in {"gift_card", "certificate"} and method.amount < payment.amount:
                raise ValueError(f"Not enough balance in payment method {payment.payment_id}")
        total_payment = sum(p.amount for p in payment_methods)
        if total_payment != total_price:
            raise ValueError(f"Payment amount does not add up, total price is {total_price}, but paid "
                             f"{total_payment}")
        for payment in payment_methods:
            method = user.payment_methods[payment.payment_id]
            if method.source == "gift_card":
                method.amount -= payment.amount
            elif method.source == "certificate":
                user.payment_methods.pop(payment.payment_id)
        for instance in instances:
            instance.available_seats[cabin] -= len(passengers)
        self.db.reservations[reservation_id] = reservation
        self.db.users[user_id].reservations.append(reservation_id)
        return reservation

    @tool(ToolType.GENERIC, CALCULATE_DESCRIPTION, **CALCULATE_PARAMS)
    def calculate(self, expression: str) -> str:
        return calculate_expression(expression)

    @tool(ToolType.WRITE, "Cancel a whole reservation: every payment is refunded (a negative copy of each is added "
          "to the payment history) and the reservation is marked cancelled. Returns the updated reservation.",
          reservation_id=_RESERVATION_ID)
    def cancel_reservation(self, reservation_id: str) -> Reservation:
        reservation = self._get_reservation(reservation_id)
        refunds = [Payment(payment_id=p.payment_id, amount=-p.amount) for p in reservation.payment_history]
        reservation.payment_history.extend(refunds)
        reservation.status = "cancelled"
        return reservation  # seats are not released (as in τ²-bench)

    @tool(ToolType.READ, "Look up a reservation: flights, passengers, payments, baggage, insurance and status.",
          reservation_id=_RESERVATION_ID)
    def get_reservation_details(self, reservation_id: str) -> Reservation:
        return self._get_reservation(reservation_id)

    @tool(ToolType.READ, "Look up a customer's profile: name, address, date of birth, membership, saved payment "
          "methods and passengers, and reservation codes.", user_id=_USER_ID)
    def get_user_details(self, user_id: str):
        return self._get_user(user_id)

    @tool(ToolType.READ, "List every airport served, as IATA code and city.")
    def list_all_airports(self) -> list[AirportCode]:
        return [AirportCode(iata=code, city=city) for code, city in AIRPORTS]

    @tool(ToolType.READ, "Find the direct flights from one airport to another on a date that can still be booked, "
          "with the seats left and the price in each cabin.",
          origin=_AIRPORT, destination=_AIRPORT, date=string("The travel date, YYYY-MM-DD."))
    def search_direct_flight(self, origin: str, destination: str, date: str) -> list[DirectFlight]:
        return self._search_direct_flight(date=date, origin=origin, destination=destination)

    @tool(ToolType.READ, "Find connections with exactly one stop from one airport to another leaving on a date: "
          "pairs of flights where the second leaves the connecting airport after the first arrives.",
          origin=_AIRPORT, destination=_AIRPORT, date=string("The travel date of the first flight, YYYY-MM-DD."))
    def search_onestop_flight(self, origin: str, destination: str, date: str) -> list:
        results = []
        for first in self._search_direct_flight(date=date, origin=origin, destination=None):
            first.date = date
            date2 = f"2024-05-{int(date[-2:]) + 1}" if "+1" in first.scheduled_arrival_time_est else date
            for second in self._search_direct_flight(date=date2, origin=first.destination,
                                                     destination=destination,
                                                     leave_after=first.scheduled_arrival_time_est):
                second.date = date2
                results.append([first, second])
        return results

    @tool(ToolType.WRITE, "Issue a travel certificate of the given amount to a customer (added to their payment "
          "methods). Use it only as the policy allows.", user_id=_USER_ID,
          amount=integer("The certificate's value in dollars."))
    def send_certificate(self, user_id: str, amount: int) -> str:
        user = self._get_user(user_id)
        for payment_id in [f"certificate_{n}" for n in NEW_CERTIFICATE_NUMBERS]:
            if payment_id not in user.payment_methods:
                user.payment_methods[payment_id] = Certificate(id=payment_id, amount=amount, source="certificate")
                return f"Certificate {payment_id} added to user {user_id} with amount {amount}."
        raise ValueError("Too many certificates")

    @tool(ToolType.GENERIC, TRANSFER_DESCRIPTION, **TRANSFER_PARAMS)
    def transfer_to_human_agents(self, summary: str) -> str:
        return "Transfer successful"

    @tool(ToolType.WRITE, "Change the number of checked bags of a reservation. Each added non-free bag costs 50, "
          "charged to a saved payment method (not a certificate).", reservation_id=_RESERVATION_ID,
          total_baggages=integer("The new total number of checked bags."),
          nonfree_baggages=integer("The new number of non-free checked bags."), payment_id=_PAYMENT_ID)
    def update_reservation_baggages(self, reservation_id: str, total_baggages: int, nonfree_baggages: int,
                                    payment_id: str) -> Reservation:
        reservation = self._get_reservation(reservation_id)
        user = self._get_user(reservation.user_id)
        total_price = 50 * max(0, nonfree_baggages - reservation.nonfree_baggages)
        payment = self._payment_for_update(user, payment_id, total_price)
        if payment is not None:
            reservation.payment_history.append(payment)
        reservation.total_baggages = total_baggages
        reservation.nonfree_baggages = nonfree_baggages
        return reservation

    @tool(ToolType.WRITE, "Change the flights and/or cabin of a reservation. Give the complete new itinerary: every "
          "segment, including those that stay the same. Unchanged segments keep their price; the fare difference "
          "is charged (or refunded) to a saved payment method (not a certificate).",
          reservation_id=_RESERVATION_ID, cabin=_CABIN, flights=_FLIGHTS, payment_id=_PAYMENT_ID)
    def update_reservation_flights(self, reservation_id: str, cabin: str, flights: list,
                                   payment_id: str) -> Reservation:
        if all(isinstance(f, dict) for f in flights):
            flights = [FlightInfo(**f) for f in flights]
        reservation = self._get_reservation(reservation_id)
        user = self._get_user(reservation.user_id)
        total_price = 0
        new_flights = []
        for info in flights:
            kept = next((f for f in reservation.flights if f.flight_number == info.flight_number
                         and f.date == info.date and cabin == reservation.cabin), None)
            if kept:
                total_price += kept.price * len(reservation.passengers)
                new_flights.append(kept)
                continue
            flight = self._get_flight(info.flight_number)
            instance = self._get_flight_instance(info.flight_number, info.date)
            if not isinstance(instance, FlightDateStatusAvailable):
                raise ValueError(f"Flight {info.flight_number} not available on date {info.date}")
            if instance.available_seats[cabin] < len(reservation.passengers):
                raise ValueError(f"Not enough seats on flight {info.flight_number}")
            segment = ReservationFlight(flight_number=info.flight_number, date=info.date,
                                        price=instance.prices[cabin], origin=flight.origin,
                                        destination=flight.destination)
            total_price += segment.price * len(reservation.passengers)
            new_flights.append(segment)
        total_price -= sum(f.price for f in reservation.flights) * len(reservation.passengers)
        payment = self._payment_for_update(user, payment_id, total_price)
        if payment is not None:
            reservation.payment_history.append(payment)
        reservation.flights = new_flights
        reservation.cabin = cabin
        return reservation  # seat counts are not changed (as in τ²-bench)

    @tool(ToolType.WRITE, "Replace the passengers of a reservation (the number of passengers cannot change).",
          reservation_id=_RESERVATION_ID, passengers=_PASSENGERS)
    def update_reservation_passengers(self, reservation_id: str, passengers: list) -> Reservation:
        if all(isinstance(p, dict) for p in passengers):
            passengers = [Passenger(**p) for p in passengers]
        reservation = self._get_reservation(reservation_id)
        if len(passengers) != len(reservation.passengers):
            raise ValueError("Number of passengers does not match")
        reservation.passengers = deepcopy(passengers)
        return reservation

    @tool(ToolType.READ, "The status of a flight on a date (available, on time, delayed, flying, landed or "
          "cancelled).", flight_number=string("The flight number, for example 'HAT001'."),
          date=string("The date, YYYY-MM-DD."))
    def get_flight_status(self, flight_number: str, date: str) -> str:
        return self._get_flight_instance(flight_number, date).status
