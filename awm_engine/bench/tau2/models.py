"""The domains' databases as pydantic models: the same field names, types, defaults and field order as τ²-bench's
(spec/tau2.md §3), so a database dumps (``model_dump``) exactly as the DB check hashes it and tool results
serialize with the fields in the order the agent sees them.

Airline and retail ignore unknown keys (pydantic's default); every telecom model forbids them. Assignments made
by the tools are not validated (pydantic's default), as in τ²-bench.
"""
from __future__ import annotations

import datetime
import hashlib
import json
from enum import Enum
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field


def db_hash(model: BaseModel | None) -> str | None:
    """SHA-256 of ``json.dumps(model_dump(), sort_keys=True, default=str)``; None for no database (spec §4.2)."""
    if model is None:
        return None
    data = model.model_dump(warnings=False)
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``update`` merged into ``base`` the way ``addict.Dict.update`` does: nested dicts merge, anything else
    replaces."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = value
    return base


def updated_model(model: BaseModel, update: dict[str, Any] | None) -> BaseModel:
    """A new model of the same type: ``model``'s dump with ``update`` deep-merged in, validated again."""
    if not update:
        return model
    if not isinstance(update, dict):
        raise ValueError(f"initialization data must be an object, not {type(update).__name__}")
    return type(model).model_validate(deep_merge(model.model_dump(warnings=False), update))


# -- airline --------------------------------------------------------------------------------------------------

FlightType = Literal["round_trip", "one_way"]
CabinClass = Literal["business", "economy", "basic_economy"]
Insurance = Literal["yes", "no"]


class AirportCode(BaseModel):
    iata: str
    city: str


class Name(BaseModel):
    first_name: str
    last_name: str


class AirlineAddress(BaseModel):
    address1: str
    address2: Optional[str] = None
    city: str
    country: str
    state: str
    zip: str


class Payment(BaseModel):
    payment_id: str
    amount: int


class AirlineCreditCard(BaseModel):
    source: Literal["credit_card"]
    id: str
    brand: str
    last_four: str


class AirlineGiftCard(BaseModel):
    source: Literal["gift_card"]
    id: str
    amount: float


class Certificate(BaseModel):
    source: Literal["certificate"]
    id: str
    amount: float


AirlinePaymentMethod = Union[AirlineCreditCard, AirlineGiftCard, Certificate]


class Passenger(BaseModel):
    first_name: str
    last_name: str
    dob: str


class FlightDateStatusAvailable(BaseModel):
    status: Literal["available"]
    available_seats: dict[CabinClass, int]
    prices: dict[CabinClass, int]


class FlightDateStatusOnTime(BaseModel):
    status: Literal["on time"]
    estimated_departure_time_est: str
    estimated_arrival_time_est: str


class FlightDateStatusFlying(BaseModel):
    status: Literal["flying"]
    actual_departure_time_est: str
    estimated_arrival_time_est: str


class FlightDateStatusLanded(BaseModel):
    status: Literal["landed"]
    actual_departure_time_est: str
    actual_arrival_time_est: str


class FlightDateStatusCancelled(BaseModel):
    status: Literal["cancelled"]


class FlightDateStatusDelayed(BaseModel):
    status: Literal["delayed"]
    estimated_departure_time_est: str
    estimated_arrival_time_est: str


FlightDateStatus = Union[FlightDateStatusAvailable, FlightDateStatusLanded, FlightDateStatusCancelled,
                         FlightDateStatusDelayed, FlightDateStatusFlying, FlightDateStatusOnTime]


class Flight(BaseModel):
    flight_number: str
    origin: str
    destination: str
    scheduled_departure_time_est: str
    scheduled_arrival_time_est: str
    dates: dict[str, FlightDateStatus]


class DirectFlight(BaseModel):
    flight_number: str
    origin: str
    destination: str
    status: Literal["available"]
    scheduled_departure_time_est: str
    scheduled_arrival_time_est: str
    date: Optional[str] = None
    available_seats: dict[CabinClass, int]
    prices: dict[CabinClass, int]


class ReservationFlight(BaseModel):
    flight_number: str
    origin: str
    destination: str
    date: str
    price: int


class FlightInfo(BaseModel):
    flight_number: str
    date: str


class AirlineUser(BaseModel):
    user_id: str
    name: Name
    address: AirlineAddress
    email: str
    dob: str
    payment_methods: dict[str, AirlinePaymentMethod]
    saved_passengers: list[Passenger]
    membership: Literal["gold", "silver", "regular"]
    reservations: list[str]


class Reservation(BaseModel):
    reservation_id: str
    user_id: str
    origin: str
    destination: str
    flight_type: FlightType
    cabin: CabinClass
    flights: list[ReservationFlight]
    passengers: list[Passenger]
    payment_history: list[Payment]
    created_at: str
    total_baggages: int
    nonfree_baggages: int
    insurance: Insurance
    status: Optional[Literal["cancelled"]] = None


class FlightDB(BaseModel):
    flights: dict[str, Flight]
    users: dict[str, AirlineUser]
    reservations: dict[str, Reservation]


# -- retail ---------------------------------------------------------------------------------------------------

class Variant(BaseModel):
    item_id: str
    options: dict[str, str]
    available: bool
    price: float


class Product(BaseModel):
    name: str
    product_id: str
    variants: dict[str, Variant]


class UserName(BaseModel):
    first_name: str
    last_name: str


class UserAddress(BaseModel):
    address1: str
    address2: str
    city: str
    country: str
    state: str
    zip: str


class RetailCreditCard(BaseModel):
    source: Literal["credit_card"]
    id: str
    brand: str
    last_four: str


class Paypal(BaseModel):
    source: Literal["paypal"]
    id: str


class GiftCard(BaseModel):
    source: Literal["gift_card"]
    id: str
    balance: float


RetailPaymentMethod = Union[RetailCreditCard, GiftCard, Paypal]


class RetailUser(BaseModel):
    user_id: str
    name: UserName
    address: UserAddress
    email: str
    payment_methods: dict[str, RetailPaymentMethod]
    orders: list[str]


class OrderFulfillment(BaseModel):
    tracking_id: list[str]
    item_ids: list[str]


class OrderItem(BaseModel):
    name: str
    product_id: str
    item_id: str
    price: float
    options: dict[str, str]


class OrderPayment(BaseModel):
    transaction_type: Literal["payment", "refund"]
    amount: float
    payment_method_id: str


OrderStatus = Literal["processed", "pending", "pending (item modified)", "delivered", "cancelled",
                      "exchange requested", "return requested"]


class Order(BaseModel):
    order_id: str
    user_id: str
    address: UserAddress
    items: list[OrderItem]
    status: OrderStatus
    fulfillments: list[OrderFulfillment]
    payment_history: list[OrderPayment]
    cancel_reason: Optional[Literal["no longer needed", "ordered by mistake"]] = None
    exchange_items: Optional[list[str]] = None
    exchange_new_items: Optional[list[str]] = None
    exchange_payment_method_id: Optional[str] = None
    exchange_price_difference: Optional[float] = None
    return_items: Optional[list[str]] = None
    return_payment_method_id: Optional[str] = None


class RetailDB(BaseModel):
    products: dict[str, Product]
    users: dict[str, RetailUser]
    orders: dict[str, Order]


# -- telecom: the agent's CRM ---------------------------------------------------------------------------------

class NoExtra(BaseModel):
    model_config = ConfigDict(extra="forbid")


DEFAULT_START_DATE = datetime.date(2025, 1, 1)


class TelecomAddress(NoExtra):
    street: str
    city: str
    state: str
    zip_code: str


class Plan(NoExtra):
    plan_id: str
    name: str
    data_limit_gb: float
    price_per_month: float
    data_refueling_price_per_gb: float


class DeviceType(str, Enum):
    PHONE = "phone"
    ROUTER = "router"
    TABLET = "tablet"
    WATCH = "watch"
    OTHER = "other"


class Device(NoExtra):
    device_id: str
    device_type: DeviceType
    model: str
    imei: Optional[str] = None
    is_esim_capable: bool
    activated: bool = False
    activation_date: Optional[datetime.datetime] = None
    last_esim_transfer_date: Optional[datetime.datetime] = None


class LineStatus(str, Enum):
    ACTIVE = "Active"
    SUSPENDED = "Suspended"
    PENDING_ACTIVATION = "Pending Activation"
    CLOSED = "Closed"


class Line(NoExtra):
    line_id: str
    phone_number: str
    status: LineStatus = LineStatus.PENDING_ACTIVATION
    plan_id: str
    device_id: Optional[str] = None
    data_used_gb: float = 0.0
    data_refueling_gb: float = 0.0
    roaming_enabled: bool = False
    contract_end_date: Optional[datetime.date] = None
    last_plan_change_date: Optional[datetime.date] = None
    last_sim_replacement_date: Optional[datetime.date] = None
    suspension_start_date: Optional[datetime.date] = None


class LineItem(NoExtra):
    description: str
    amount: float
    date: datetime.date
    item_type: str


class BillStatus(str, Enum):
    DRAFT = "Draft"
    ISSUED = "Issued"
    AWAITING_PAYMENT = "Awaiting Payment"
    PAID = "Paid"
    OVERDUE = "Overdue"
    DISPUTED = "Disputed"


class Bill(NoExtra):
    bill_id: str
    customer_id: str
    period_start: datetime.date
    period_end: datetime.date
    issue_date: datetime.date
    total_due: float
    due_date: datetime.date
    line_items: list[LineItem] = Field(default_factory=list)
    status: BillStatus = BillStatus.DRAFT


class AccountStatus(str, Enum):
    ACTIVE = "Active"
    SUSPENDED = "Suspended"
    PENDING_VERIFICATION = "Pending Verification"
    CLOSED = "Closed"


class PaymentMethodType(str, Enum):
    CREDIT_CARD = "Credit Card"
    DEBIT_CARD = "Debit Card"
    PAYPAL = "PayPal"


class TelecomPaymentMethod(NoExtra):
    method_type: PaymentMethodType
    account_number_last_4: str
    expiration_date: str


class Customer(NoExtra):
    customer_id: str
    full_name: str
    date_of_birth: str
    email: str
    phone_number: str
    address: TelecomAddress
    account_status: AccountStatus = AccountStatus.PENDING_VERIFICATION
    payment_methods: list[TelecomPaymentMethod] = Field(default_factory=list)
    line_ids: list[str] = Field(default_factory=list)
    bill_ids: list[str] = Field(default_factory=list)
    created_at: datetime.datetime = DEFAULT_START_DATE  # type: ignore[assignment]  (a date, as τ²'s default)
    last_extension_date: Optional[datetime.date] = None
    goodwill_credit_used_this_year: float = 0.0


class TelecomDB(NoExtra):
    plans: list[Plan] = Field(default_factory=list)
    customers: list[Customer] = Field(default_factory=list)
    lines: list[Line] = Field(default_factory=list)
    bills: list[Bill] = Field(default_factory=list)
    devices: list[Device] = Field(default_factory=list)


# -- telecom: the user's phone --------------------------------------------------------------------------------

class SimStatus(str, Enum):
    ACTIVE = "active"
    MISSING = "missing"
    LOCKED_PIN = "locked_pin"
    LOCKED_PUK = "locked_puk"


class NetworkTechnology(str, Enum):
    NONE = "none"
    TWO_G = "2G"
    THREE_G = "3G"
    FOUR_G = "4G"
    FIVE_G = "5G"


class NetworkModePreference(str, Enum):
    FOUR_G_5G_PREFERRED = "4g_5g_preferred"
    FOUR_G_ONLY = "4g_only"
    THREE_G_ONLY = "3g_only"
    TWO_G_ONLY = "2g_only"


class SignalStrength(str, Enum):
    NONE = "none"
    POOR = "poor"
    FAIR = "fair"
    GOOD = "good"
    EXCELLENT = "excellent"


class PerformanceLevel(str, Enum):
    UNKNOWN = "unknown"
    POOR = "poor"
    FAIR = "fair"
    GOOD = "good"
    EXCELLENT = "excellent"


class NetworkStatus(str, Enum):
    CONNECTED = "connected"
    SEARCHING = "searching"
    NO_SERVICE = "no_service"
    EMERGENCY_ONLY = "emergency_only"


class APNNames(str, Enum):
    INTERNET = "internet"
    BROKEN = "broken"


class APNSettings(NoExtra):
    apn_name: APNNames = APNNames.INTERNET
    reset_at_reboot: bool = False
    mms_apn: Optional[str] = "mms"
    mmsc_url: Optional[str] = "http://mms.carrier.com/mms/wapenc"
    mms_proxy: Optional[str] = None
    mms_port: Optional[int] = None


class VpnDetails(NoExtra):
    server_address: Optional[str] = None
    protocol: Optional[str] = None
    server_performance: PerformanceLevel = Field(default=PerformanceLevel.UNKNOWN, validate_default=True)


class AppPermissions(NoExtra):
    sms: bool = False
    storage: bool = False
    phone: bool = False
    network: bool = False


class AppStatus(NoExtra):
    app_name: str
    permissions: AppPermissions = Field(default_factory=AppPermissions)


def _default_apps() -> dict[str, AppStatus]:
    return {"messaging": AppStatus(app_name="messaging", permissions=AppPermissions(sms=True, storage=True,
                                                                                      phone=True)),
            "browser": AppStatus(app_name="browser", permissions=AppPermissions(network=True, storage=True))}


class MockPhoneAttributes(NoExtra):
    sim_card_status: SimStatus = Field(default=SimStatus.ACTIVE, validate_default=True)
    sim_card_missing: bool = False
    airplane_mode: bool = False
    network_signal_strength: SignalStrength = Field(default=SignalStrength.GOOD, validate_default=True)
    network_technology_connected: NetworkTechnology = Field(default=NetworkTechnology.FIVE_G, validate_default=True)
    network_connection_status: NetworkStatus = Field(default=NetworkStatus.CONNECTED, validate_default=True)
    battery_level: int = 80
    data_enabled: bool = True
    roaming_enabled: bool = False
    network_mode_preference: NetworkModePreference = Field(default=NetworkModePreference.FOUR_G_5G_PREFERRED,
                                                           validate_default=True)
    active_apn_settings: APNSettings = Field(default_factory=APNSettings)
    wifi_enabled: bool = False
    wifi_connected: bool = False
    wifi_ssid: Optional[str] = None
    wifi_signal_strength: SignalStrength = Field(default=SignalStrength.NONE, validate_default=True)
    wifi_calling_enabled: bool = False
    wifi_calling_mms_over_wifi: bool = False
    data_saver_mode: bool = False
    vpn_enabled_setting: bool = False
    vpn_connected: bool = False
    vpn_details: Optional[VpnDetails] = None
    app_statuses: dict[str, AppStatus] = Field(default_factory=_default_apps)


class PaymentRequest(NoExtra):
    bill_id: str
    amount_due: float
    paid: bool = False


def _default_signal() -> dict[NetworkTechnology, SignalStrength]:
    return {NetworkTechnology.TWO_G: SignalStrength.POOR, NetworkTechnology.THREE_G: SignalStrength.FAIR,
            NetworkTechnology.FOUR_G: SignalStrength.GOOD, NetworkTechnology.FIVE_G: SignalStrength.EXCELLENT}


class UserSurroundings(NoExtra):
    name: Optional[str] = None
    phone_number: Optional[str] = None
    is_abroad: bool = False
    roaming_allowed: bool = False
    signal_strength: dict[NetworkTechnology, SignalStrength] = Field(default_factory=_default_signal)
    mobile_data_usage_exceeded: bool = False
    line_active: bool = True
    payment_request: Optional[PaymentRequest] = None


class TelecomUserDB(NoExtra):
    device: MockPhoneAttributes = Field(default_factory=MockPhoneAttributes)
    surroundings: UserSurroundings = Field(default_factory=UserSurroundings)


DB_MODELS: dict[str, type[BaseModel]] = {"airline": FlightDB, "retail": RetailDB, "telecom": TelecomDB}
