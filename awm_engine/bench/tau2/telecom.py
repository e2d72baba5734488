"""The telecom domain (spec §3.3): the agent's CRM tools (13), the user's phone tools (30) with the device
simulation, the set-up and assertion methods that tasks call by name, and ``sync`` — the coupling between the
CRM and the phone that runs after every step and every tool execution.

Quirk kept, scoped to one environment: ``break_vpn`` degrades the *default* VPN details object, which
``connect_vpn`` hands out by reference, so a later ``connect_vpn`` of the same environment connects to a poor VPN.
(τ²-bench keeps that object on the class, so there it leaks into every later environment of the process; awm
keeps it per environment so results do not depend on which process ran which task before.)
"""
from __future__ import annotations

import uuid
from datetime import date, timedelta
from typing import Any

from awm_engine.bench.tau2.models import (
    APNNames,
    APNSettings,
    Bill,
    BillStatus,
    LineItem,
    LineStatus,
    NetworkModePreference,
    NetworkStatus,
    NetworkTechnology,
    PaymentRequest,
    PerformanceLevel,
    SignalStrength,
    SimStatus,
    VpnDetails,
)
from awm_engine.bench.tau2.toolkit import (
    TRANSFER_DESCRIPTION,
    TRANSFER_PARAMS,
    Toolkit,
    ToolType,
    number,
    obj,
    string,
    tool,
)

TODAY = date(2025, 2, 25)


def get_today() -> date:
    return TODAY


_CUSTOMER_ID = string("The customer's id, for example 'C1001'.")
_LINE_ID = string("The line's id, for example 'L1001'.")


class TelecomTools(Toolkit):
    """The agent's tools over the CRM (``TelecomDB``), plus the set-up and assertion methods tasks name."""

    # -- lookups ------------------------------------------------------------------------------------
    @tool(ToolType.READ, "Find the customer whose contact number, or the number of one of whose lines, is the given "
          "phone number.", phone_number=string("The phone number, for example '555-123-2002'."))
    def get_customer_by_phone(self, phone_number: str):
        for customer in self.db.customers:
            if customer.phone_number == phone_number:
                return customer
            for line_id in customer.line_ids:
                line = self._get_line_by_id(line_id)
                if line and line.phone_number == phone_number:
                    return customer
        raise ValueError(f"Customer with phone number {phone_number} not found")

    @tool(ToolType.READ, "Look up a customer by customer id.", customer_id=_CUSTOMER_ID)
    def get_customer_by_id(self, customer_id: str):
        return self._find(self.db.customers, "customer_id", customer_id, f"Customer with ID {customer_id} not found")

    @tool(ToolType.READ, "Find customers by full name and date of birth (the name is matched without regard to "
          "case). Returns a list, possibly empty.", full_name=string("The customer's full name."),
          dob=string("The date of birth, YYYY-MM-DD."))
    def get_customer_by_name(self, full_name: str, dob: str) -> list:
        return [c for c in self.db.customers
                if c.full_name.lower() == full_name.lower() and c.date_of_birth == dob]

    @staticmethod
    def _find(records: list, field: str, value: Any, error: str):
        for record in records:
            if getattr(record, field) == value:
                return record
        raise ValueError(error)

    def _get_line_by_phone(self, phone_number: str):
        return self._find(self.db.lines, "phone_number", phone_number,
                          f"Line with phone number {phone_number} not found")

    def _get_line_by_id(self, line_id: str):
        return self._find(self.db.lines, "line_id", line_id, f"Line with ID {line_id} not found")

    def _get_plan_by_id(self, plan_id: str):
        return self._find(self.db.plans, "plan_id", plan_id, f"Plan with ID {plan_id} not found")

    def _get_device_by_id(self, device_id: str):
        return self._find(self.db.devices, "device_id", device_id, f"Device with ID {device_id} not found")

    def _get_bill_by_id(self, bill_id: str):
        return self._find(self.db.bills, "bill_id", bill_id, f"Bill with ID {bill_id} not found")

    def _get_target_line(self, customer_id: str, line_id: str):
        customer = self.get_customer_by_id(customer_id)
        if line_id not in customer.line_ids:
            raise ValueError(f"Line {line_id} not found for customer {customer_id}")
        return self._get_line_by_id(line_id)

    def get_available_plan_ids(self) -> list[str]:
        return [plan.plan_id for plan in self.db.plans]

    @tool(ToolType.READ, "Look up any record by its id; the first letter says what it is: C customer, L line, "
          "D device, B bill, P plan.", id=string("The id, for example 'L1002' or 'B1001'."))
    def get_details_by_id(self, id: str):
        if id.startswith("L"):
            return self._get_line_by_id(id)
        if id.startswith("D"):
            return self._get_device_by_id(id)
        if id.startswith("B"):
            return self._get_bill_by_id(id)
        if id.startswith("C"):
            return self.get_customer_by_id(id)
        if id.startswith("P"):
            return self._get_plan_by_id(id)
        raise ValueError(f"Unknown ID format or type: {id}")

    # -- lines ----------------------------------------------------------------------------------------
    @tool(ToolType.WRITE, "Suspend an active line of the customer (for at most 6 months; a $5 monthly holding fee "
          "applies).", customer_id=_CUSTOMER_ID, line_id=_LINE_ID, reason=string("Why the line is suspended."))
    def suspend_line(self, customer_id: str, line_id: str, reason: str) -> dict[str, Any]:
        line = self._get_target_line(customer_id, line_id)
        if line.status != LineStatus.ACTIVE:
            raise ValueError("Line must be active to suspend")
        line.status = LineStatus.SUSPENDED
        line.suspension_start_date = get_today()
        return {"message": "Line suspended successfully. $5/month holding fee will apply.", "line": line}

    @tool(ToolType.WRITE, "Reactivate a suspended (or pending activation) line of the customer.",
          customer_id=_CUSTOMER_ID, line_id=_LINE_ID)
    def resume_line(self, customer_id: str, line_id: str) -> dict[str, Any]:
        line = self._get_target_line(customer_id, line_id)
        if line.status not in [LineStatus.SUSPENDED, LineStatus.PENDING_ACTIVATION]:
            raise ValueError("Line must be suspended to resume")
        line.status = LineStatus.ACTIVE
        line.suspension_start_date = None
        return {"message": "Line resumed successfully", "line": line}

    # -- bills ----------------------------------------------------------------------------------------
    @tool(ToolType.READ, "The customer's bills, newest first.", required=("customer_id",),
          customer_id=_CUSTOMER_ID, limit={"type": "integer", "description": "At most this many bills (default 12).",
                                           "default": 12})
    def get_bills_for_customer(self, customer_id: str, limit: int = 12) -> list:
        customer = self.get_customer_by_id(customer_id)
        bills = [self._get_bill_by_id(bill_id) for bill_id in customer.bill_ids]
        return sorted(bills, key=lambda b: b.issue_date, reverse=True)[:limit]

    @tool(ToolType.WRITE, "Send the customer a request to pay one of their bills; the bill then awaits payment. "
          "Only one bill may await payment at a time, and the bill's status is not checked: check it first.",
          customer_id=_CUSTOMER_ID, bill_id=string("The bill's id, for example 'B1001'."))
    def send_payment_request(self, customer_id: str, bill_id: str) -> str:
        customer = self.get_customer_by_id(customer_id)
        if not customer:
            raise ValueError(f"Customer {customer_id} not found")
        if len(self._get_bills_awaiting_payment(customer)) != 0:
            raise ValueError("A bill is already awaiting payment for this customer")
        if bill_id not in customer.bill_ids:
            raise ValueError(f"Bill {bill_id} not found for customer {customer_id}")
        bill = self._get_bill_by_id(bill_id)
        bill.status = BillStatus.AWAITING_PAYMENT
        return f"Payment request sent to the customer for bill {bill.bill_id}"

    def _get_bills_awaiting_payment(self, customer) -> list:
        bills = []
        for bill_id in customer.bill_ids:
            bill = self._get_bill_by_id(bill_id)
            if bill and bill.status == BillStatus.AWAITING_PAYMENT:
                bills.append(bill)
        return bills

    def _set_bill_to_paid(self, bill_id: str) -> str:
        bill = self._get_bill_by_id(bill_id)
        bill.status = BillStatus.PAID
        return f"Bill {bill_id} set to paid"

    def _apply_one_time_charge(self, customer_id: str, amount: float, description: str) -> None:
        """Add a charge (or credit) to the customer's draft bill, creating one for next month if there is none (with
        a random id: the CRM is not deterministic here, as in τ²-bench)."""
        customer = self.get_customer_by_id(customer_id)
        draft = None
        for bill_id in customer.bill_ids:
            bill = self._get_bill_by_id(bill_id)
            if bill and bill.status == BillStatus.DRAFT:
                draft = bill
                break
        if not draft:
            today = get_today()
            next_month = (today.replace(day=1) + timedelta(days=32)).replace(day=1)
            period_end = next_month.replace(month=next_month.month + 1 if next_month.month < 12 else 1,
                                            year=next_month.year if next_month.month < 12 else next_month.year + 1)
            new_bill_id = f"B{uuid.uuid4().hex[:8]}"
            draft = Bill(bill_id=new_bill_id, customer_id=customer_id, period_start=next_month,
                         period_end=period_end - timedelta(days=1), issue_date=next_month, total_due=0,
                         due_date=next_month + timedelta(days=14), status=BillStatus.DRAFT)
            self.db.bills.append(draft)
            customer.bill_ids.append(new_bill_id)
        draft.line_items.append(LineItem(description=description, amount=amount, date=get_today(),
                                         item_type="Credit" if amount < 0 else "Charge"))
        draft.total_due += amount

    # -- usage --------------------------------------------------------------------------------------
    @tool(ToolType.READ, "The line's data usage in the current billing cycle: data used, the plan's limit, data "
          "refueled, and when the cycle ends.", customer_id=_CUSTOMER_ID, line_id=_LINE_ID)
    def get_data_usage(self, customer_id: str, line_id: str) -> dict[str, Any]:
        line = self._get_target_line(customer_id, line_id)
        plan = self._get_plan_by_id(line.plan_id)
        today = get_today()
        cycle_end = date(today.year, today.month + 1 if today.month < 12 else 1, 1) - timedelta(days=1)
        return {"line_id": line_id, "data_used_gb": line.data_used_gb, "data_limit_gb": plan.data_limit_gb,
                "data_refueling_gb": line.data_refueling_gb, "cycle_end_date": cycle_end}

    def set_data_usage(self, customer_id: str, line_id: str, data_used_gb: float) -> str:
        line = self._get_target_line(customer_id, line_id)
        line.data_used_gb = data_used_gb
        return f"Data usage set to {data_used_gb} GB for line {line_id}"

    @tool(ToolType.WRITE, "Turn international roaming on for the customer's line.",
          customer_id=_CUSTOMER_ID, line_id=_LINE_ID)
    def enable_roaming(self, customer_id: str, line_id: str) -> str:
        line = self._get_target_line(customer_id, line_id)
        if line.roaming_enabled:
            return "Roaming was already enabled"
        line.roaming_enabled = True
        return "Roaming enabled successfully"

    @tool(ToolType.WRITE, "Turn international roaming off for the customer's line.",
          customer_id=_CUSTOMER_ID, line_id=_LINE_ID)
    def disable_roaming(self, customer_id: str, line_id: str) -> str:
        line = self._get_target_line(customer_id, line_id)
        if not line.roaming_enabled:
            return "Roaming was already disabled"
        line.roaming_enabled = False
        return "Roaming disabled successfully"

    @tool(ToolType.GENERIC, TRANSFER_DESCRIPTION, **TRANSFER_PARAMS)
    def transfer_to_human_agents(self, summary: str) -> str:
        return "Transfer successful"

    @tool(ToolType.WRITE, "Add data to the customer's line for the current cycle; it is charged to the customer's "
          "next bill at the plan's price per GB.", customer_id=_CUSTOMER_ID, line_id=_LINE_ID,
          gb_amount=number("How many GB to add (more than 0)."))
    def refuel_data(self, customer_id: str, line_id: str, gb_amount: float) -> dict[str, Any]:
        line = self._get_target_line(customer_id, line_id)
        if gb_amount <= 0:
            raise ValueError("Refuel amount must be positive")
        plan = self._get_plan_by_id(line.plan_id)
        if not plan:
            raise ValueError("Plan not found for this line")
        charge = gb_amount * plan.data_refueling_price_per_gb
        line.data_refueling_gb += gb_amount
        self._apply_one_time_charge(customer_id, charge,
                                    f"Data refueling: {gb_amount} GB at ${plan.data_refueling_price_per_gb}/GB")
        return {"message": f"Successfully added {gb_amount} GB of data for line {line_id} for ${charge:.2f}",
                "new_data_refueling_gb": line.data_refueling_gb, "charge": charge}

    # -- set-up (called by tasks) ---------------------------------------------------------------------
    def suspend_line_for_overdue_bill(self, customer_id: str, line_id: str, new_bill_id: str,
                                      contract_ended: bool) -> str:
        line = self._get_line_by_id(line_id)
        if line.status != LineStatus.ACTIVE:
            raise ValueError("Line must be active to suspend for unpaid bill")
        plan = self._get_plan_by_id(line.plan_id)
        amount = plan.price_per_month
        if amount <= 0:
            raise ValueError("Amount must be positive for overdue bill")
        customer = self.get_customer_by_id(customer_id)
        if not customer:
            raise ValueError(f"Customer {customer_id} not found")
        if any(self._get_bill_by_id(b).status == BillStatus.OVERDUE for b in customer.bill_ids):
            raise ValueError("Customer already has an overdue bill")
        today = get_today()
        last_day_of_last_month = today.replace(day=1) - timedelta(days=1)
        first_day_of_last_month = last_day_of_last_month.replace(day=1)
        bill = Bill(bill_id=new_bill_id, customer_id=customer_id, period_start=first_day_of_last_month,
                    period_end=last_day_of_last_month, issue_date=first_day_of_last_month, total_due=0,
                    due_date=first_day_of_last_month + timedelta(days=14), status=BillStatus.OVERDUE)
        bill.line_items.append(LineItem(description=f"Charge for line {line.line_id}", amount=amount,
                                        date=get_today(), item_type="Charge" if amount > 0 else "Credit"))
        bill.total_due += amount
        self.db.bills.append(bill)
        customer.bill_ids.append(new_bill_id)
        line.status = LineStatus.SUSPENDED
        line.suspension_start_date = get_today()
        if contract_ended:
            line.contract_end_date = last_day_of_last_month
        return f"Line {line_id} suspended for unpaid bill {new_bill_id}. Contract ended: {contract_ended}"

    # -- assertions (called by tasks) -----------------------------------------------------------------
    def assert_data_refueling_amount(self, customer_id: str, line_id: str, expected_amount: float) -> bool:
        return abs(self._get_target_line(customer_id, line_id).data_refueling_gb - expected_amount) < 1e-6

    def assert_line_status(self, customer_id: str, line_id: str, expected_status: Any) -> bool:
        return self._get_target_line(customer_id, line_id).status == expected_status

    def assert_overdue_bill_exists(self, customer_id: str, overdue_bill_id: str) -> bool:
        customer = self.get_customer_by_id(customer_id)
        if not customer:
            raise ValueError(f"Customer {customer_id} not found")
        if overdue_bill_id not in customer.bill_ids:
            raise ValueError(f"Overdue bill {overdue_bill_id} not found")
        if self._get_bill_by_id(overdue_bill_id).status != BillStatus.OVERDUE:
            raise ValueError(f"Overdue bill {overdue_bill_id} is not overdue")
        return True

    def assert_no_overdue_bill(self, overdue_bill_id: str) -> bool:
        try:
            if self._get_bill_by_id(overdue_bill_id).status == BillStatus.PAID:
                return True
        except ValueError:
            return True
        return False


_SIGNAL_ICONS = {SignalStrength.NONE: "📵 No Signal", SignalStrength.POOR: "📶¹ Poor", SignalStrength.FAIR: "📶² Fair",
                 SignalStrength.GOOD: "📶³ Good", SignalStrength.EXCELLENT: "📶⁴ Excellent"}
_SPEED_RANGES = {NetworkTechnology.TWO_G: (0.1, 0.4), NetworkTechnology.THREE_G: (1.0, 5.0),
                 NetworkTechnology.FOUR_G: (10.0, 100.0), NetworkTechnology.FIVE_G: (50.0, 500.0),
                 NetworkTechnology.NONE: (0.0, 0.0)}
_SIGNAL_FACTORS = {SignalStrength.POOR: 0.2, SignalStrength.FAIR: 0.5, SignalStrength.GOOD: 0.8,
                   SignalStrength.EXCELLENT: 1.0, SignalStrength.NONE: 0.0}
_SPEED_ADVICE = {"Very Poor": "Very slow: even basic web pages may not load.",
                 "Poor": "Slow: browsing is sluggish and streaming is hard.",
                 "Fair": "Fine for browsing and standard-definition video.",
                 "Good": "Good for most things, HD streaming included.",
                 "Excellent": "Very fast."}
_MODE_TO_TECH = {NetworkModePreference.FOUR_G_ONLY: NetworkTechnology.FOUR_G,
                 NetworkModePreference.THREE_G_ONLY: NetworkTechnology.THREE_G,
                 NetworkModePreference.TWO_G_ONLY: NetworkTechnology.TWO_G}


class TelecomUserTools(Toolkit):
    """The user's own phone (``TelecomUserDB``): what the user can check and change, the device simulation, and the
    set-up and assertion methods tasks name."""

    def __init__(self, db):
        super().__init__(db)
        # handed out by reference on connect_vpn; break_vpn degrades it (see the module docstring)
        self.default_vpn_details = VpnDetails(server_address="192.168.1.1", protocol="OpenVPN",
                                              server_performance=PerformanceLevel.EXCELLENT)

    @property
    def device(self):
        return self.db.device

    @property
    def surroundings(self):
        return self.db.surroundings

    # -- set-up -------------------------------------------------------------------------------------
    def set_user_info(self, name: str, phone_number: str) -> None:
        self.db.surroundings.name = name
        self.db.surroundings.phone_number = phone_number

    def set_user_location(self, abroad: bool) -> None:
        self.db.surroundings.is_abroad = abroad

    # -- status bar and network ---------------------------------------------------------------------
    @tool(ToolType.READ, "Look at the icons in your phone's status bar: signal, network type, mobile data and data "
          "saver, Wi-Fi, VPN and battery.")
    def check_status_bar(self) -> str:
        return f"Status Bar: {self._check_status_bar()}"

    def _check_status_bar(self) -> str:
        d = self.device
        parts = []
        if d.airplane_mode:
            parts.append("✈️ Airplane Mode")
        else:
            parts.append(_SIGNAL_ICONS.get(d.network_signal_strength, "📵 No Signal"))
            if d.network_technology_connected != NetworkTechnology.NONE:
                parts.append(d.network_technology_connected.value)
            if d.data_enabled and d.network_technology_connected != NetworkTechnology.NONE:
                parts.append("📱 Data Enabled")
                if d.data_saver_mode:
                    parts.append("🔽 Data Saver")
            else:
                parts.append("📵 Data Disabled")
        if d.wifi_enabled and d.wifi_connected:
            parts.append(f"📡 Connected to {d.wifi_ssid}" if d.wifi_ssid else "📡 Enabled")
        if d.vpn_connected:
            parts.append("🔒 VPN Connected")
        parts.append(f"🔋 {d.battery_level}%")
        return " | ".join(parts)

    @tool(ToolType.READ, "Check your phone's cellular and Wi-Fi connection: airplane mode, SIM, connection, signal, "
          "network type, mobile data, data roaming and Wi-Fi.")
    def check_network_status(self) -> str:
        d = self.device
        lines = [f"Airplane Mode: {'ON' if d.airplane_mode else 'OFF'}",
                 f"SIM Card Status: {self._check_sim_status().value}",
                 f"Cellular Connection: {d.network_connection_status.value}",
                 f"Cellular Signal: {d.network_signal_strength.value}",
                 f"Cellular Network Type: {d.network_technology_connected.value}",
                 f"Mobile Data Enabled: {'Yes' if d.data_enabled else 'No'}",
                 f"Data Roaming Enabled: {'Yes' if d.roaming_enabled else 'No'}",
                 f"Wi-Fi Radio: {'ON' if d.wifi_enabled else 'OFF'}",
                 f"Wi-Fi Connected: {'Yes' if d.wifi_connected else 'No'}"]
        if d.wifi_connected:
            lines.append(f"Connected Wi-Fi Network: {d.wifi_ssid}")
        return "\n".join(lines)

    @tool(ToolType.READ, "Check which kind of cellular network your phone prefers.")
    def check_network_mode_preference(self) -> str:
        return f"Network Mode Preference: {self.device.network_mode_preference.value}"

    @tool(ToolType.WRITE, "Choose which kind of cellular network your phone prefers: 4G/5G preferred, 4G only, 3G "
          "only or 2G only. Faster networks give faster data.",
          mode={"type": "string", "enum": [m.value for m in NetworkModePreference],
                "description": "The network mode."})
    def set_network_mode_preference(self, mode: Any) -> str:
        valid = self._set_network_mode_preference(mode)
        if valid is None:
            choices = ", ".join(m.value for m in NetworkModePreference)
            return (f"Failed to set network mode: '{mode}' is not a valid option. Please use one of: {choices}\n"
                    f"Status Bar: {self._check_status_bar()}")
        value = valid.value if isinstance(valid, NetworkModePreference) else valid
        return f"Preferred Network Mode set to: {value}\nStatus Bar: {self._check_status_bar()}"

    def _set_network_mode_preference(self, mode: Any):
        try:
            if isinstance(mode, str):
                mode = NetworkModePreference(mode)
            self.device.network_mode_preference = mode
            self.simulate_network_search()
            return mode
        except ValueError:
            return None

    def _get_mobile_data_working(self) -> bool:
        d, s = self.device, self.surroundings
        if d.airplane_mode or d.network_signal_strength == SignalStrength.NONE:
            return False
        if d.network_connection_status == NetworkStatus.NO_SERVICE:
            return False
        if s.is_abroad and (not d.roaming_enabled or not s.roaming_allowed):
            return False
        if not d.data_enabled:
            return False
        if s.mobile_data_usage_exceeded:
            return False
        return True

    @tool(ToolType.READ, "Run a speed test of your mobile data connection (download speed) and see what it is good "
          "for.")
    def run_speed_test(self) -> str:
        speed, description = self._run_speed_test()
        if speed is None:
            return f"Speed test failed: {description or 'Could not determine speed'}."
        advice = _SPEED_ADVICE.get(description, "")
        return f"Speed Test Result: {speed:.2f} Mbps ({description}). {advice}"

    def _run_speed_test(self) -> tuple[float | None, str | None]:
        """Midpoint of the technology's range × the signal factor × penalties (a poor VPN ×0.1, data saver ×0.2),
        banded: < 1 Very Poor, < 5 Poor, < 25 Fair, < 100 Good, else Excellent."""
        if not self._get_mobile_data_working():
            return None, "No Connection"
        d = self.device
        factor = 0.1 if (d.vpn_connected and d.vpn_details
                         and d.vpn_details.server_performance == PerformanceLevel.POOR) else 1.0
        if d.data_saver_mode:
            factor *= 0.2
        low, high = _SPEED_RANGES.get(d.network_technology_connected, (0.0, 0.0))
        signal = _SIGNAL_FACTORS.get(d.network_signal_strength, 0.0)
        speed = round((low + high) / 2.0 * signal * factor, 2)
        if speed < 1:
            return speed, "Very Poor"
        if speed < 5:
            return speed, "Poor"
        if speed < 25:
            return speed, "Fair"
        if speed < 100:
            return speed, "Good"
        return speed, "Excellent"

    # -- airplane mode ------------------------------------------------------------------------------
    @tool(ToolType.WRITE, "Turn airplane mode on or off (on cuts every radio: cellular, Wi-Fi, Bluetooth).")
    def toggle_airplane_mode(self) -> str:
        state = self._toggle_airplane_mode()
        return f"Airplane Mode is now {'ON' if state else 'OFF'}.\nStatus Bar: {self._check_status_bar()}"

    def _toggle_airplane_mode(self) -> bool:
        d = self.device
        was_on = d.airplane_mode
        d.airplane_mode = not was_on
        if was_on:
            d.network_connection_status = NetworkStatus.SEARCHING
            if d.wifi_enabled:
                d.wifi_connected = False
                d.wifi_ssid = None
                d.wifi_signal_strength = SignalStrength.NONE
        else:
            d.wifi_connected = False
            d.wifi_ssid = None
            d.wifi_signal_strength = SignalStrength.NONE
            if d.vpn_connected:
                self._disconnect_vpn()
        self.simulate_network_search()
        return d.airplane_mode

    def turn_airplane_mode_on(self) -> str:
        if not self._toggle_airplane_mode():
            self._toggle_airplane_mode()
        return "Airplane Mode is now ON."

    def turn_airplane_mode_off(self) -> str:
        if self._toggle_airplane_mode():
            self._toggle_airplane_mode()
        return "Airplane Mode is now OFF."

    # -- SIM ----------------------------------------------------------------------------------------
    @tool(ToolType.READ, "Check whether your SIM card works: active, missing, or locked by a PIN or PUK code.")
    def check_sim_status(self) -> str:
        status = self._check_sim_status()
        texts = {SimStatus.ACTIVE: "Your SIM card is active and working.",
                 SimStatus.MISSING: "No SIM card detected in the phone.",
                 SimStatus.LOCKED_PIN: "The SIM card is locked with a PIN code.",
                 SimStatus.LOCKED_PUK: "The SIM card is locked with a PUK code."}
        return texts.get(status, f"Unknown SIM status: {getattr(status, 'value', status)}")

    def _check_sim_status(self):
        if self.device.sim_card_missing:
            return SimStatus.MISSING
        return self.device.sim_card_status

    @tool(ToolType.WRITE, "Take the SIM card out and put it back in, which can fix a SIM that is not recognised.")
    def reseat_sim_card(self) -> str:
        self.device.sim_card_missing = False
        self.simulate_network_search()
        return f"SIM card re-seated successfully.\nStatus Bar: {self._check_status_bar()}"

    def unseat_sim_card(self) -> str:
        self.device.sim_card_missing = True
        self.simulate_network_search()
        return "SIM card un-seated successfully."

    def lock_sim_card(self, mode: str) -> str:
        if mode == "pin":
            self.device.sim_card_status = SimStatus.LOCKED_PIN
        elif mode == "puk":
            self.device.sim_card_status = SimStatus.LOCKED_PUK
        self.simulate_network_search()
        return f"SIM card locked successfully in {mode} mode."

    # -- mobile data and roaming --------------------------------------------------------------------
    @tool(ToolType.WRITE, "Turn mobile data on or off (whether the phone may use the cellular network for "
          "internet).")
    def toggle_data(self) -> str:
        state = self._toggle_data()
        return f"Mobile Data is now {'ON' if state else 'OFF'}.\nStatus Bar: {self._check_status_bar()}"

    def _toggle_data(self) -> bool:
        state = not self.device.data_enabled
        self.device.data_enabled = state
        self.simulate_network_search()
        return state

    def turn_data_on(self) -> str:
        self.device.data_enabled = True
        return "Data connection restored."

    def turn_data_off(self) -> str:
        if self._toggle_data():
            self._toggle_data()
        return "Data connection broken."

    @tool(ToolType.WRITE, "Turn data roaming on or off (whether the phone may use mobile data on other carriers' "
          "networks, e.g. abroad).")
    def toggle_roaming(self) -> str:
        state = self._toggle_roaming()
        return f"Data Roaming is now {'ON' if state else 'OFF'}.\nStatus Bar: {self._check_status_bar()}"

    def _toggle_roaming(self) -> bool:
        state = not self.device.roaming_enabled
        self.device.roaming_enabled = state
        self.simulate_network_search()
        return state

    def turn_roaming_on(self) -> str:
        if not self._toggle_roaming():
            self._toggle_roaming()
        return "Data Roaming is now ON."

    def turn_roaming_off(self) -> str:
        if self._toggle_roaming():
            self._toggle_roaming()
        return "Data Roaming is now OFF."

    @tool(ToolType.READ, "Check whether a data-limiting feature (Data Saver) is on.")
    def check_data_restriction_status(self) -> str:
        if self.device.data_saver_mode:
            return "Data Saver mode is ON (limits data usage)."
        return "Data Saver mode is OFF."

    @tool(ToolType.WRITE, "Turn Data Saver on or off (on uses less data and can make data slower).")
    def toggle_data_saver_mode(self) -> str:
        state = self._toggle_data_saver_mode()
        return f"Data Saver Mode is now {'ON' if state else 'OFF'}.\nStatus Bar: {self._check_status_bar()}"

    def _toggle_data_saver_mode(self) -> bool:
        state = not self.device.data_saver_mode
        self.device.data_saver_mode = state
        return state

    def turn_data_saver_mode_on(self) -> str:
        if not self._toggle_data_saver_mode():
            self._toggle_data_saver_mode()
        return "Data Saver Mode is now ON."

    def turn_data_saver_mode_off(self) -> str:
        if self._toggle_data_saver_mode():
            self._toggle_data_saver_mode()
        return "Data Saver Mode is now OFF."

    # -- APN ----------------------------------------------------------------------------------------
    @tool(ToolType.READ, "Check the APN settings your phone uses for mobile data: the APN name and the MMSC URL "
          "used for picture messages.")
    def check_apn_settings(self) -> str:
        settings = self.device.active_apn_settings
        name = settings.apn_name.value if isinstance(settings.apn_name, APNNames) else settings.apn_name
        return (f"Current APN Name: {name or 'Not Set'}\nMMSC URL (for picture messages): "
                f"{settings.mmsc_url or 'Not Set'}\n(These are technical settings, usually best left unchanged.)")

    @tool(ToolType.WRITE, "Replace your phone's APN settings.",
          apn_settings=obj("The new APN settings.", {
              "apn_name": {"type": "string", "enum": [n.value for n in APNNames], "description": "The APN name."},
              "reset_at_reboot": {"type": "boolean", "description": "Reset to defaults at the next reboot."},
              "mms_apn": {"type": ["string", "null"], "description": "The APN used for MMS."},
              "mmsc_url": {"type": ["string", "null"], "description": "The MMSC URL, needed for MMS."},
              "mms_proxy": {"type": ["string", "null"], "description": "The MMS proxy, if any."},
              "mms_port": {"type": ["integer", "null"], "description": "The MMS proxy port, if any."}},
              required=[]))
    def set_apn_settings(self, apn_settings: Any) -> str:
        if isinstance(apn_settings, dict):
            apn_settings = APNSettings(**apn_settings)
        self.device.active_apn_settings = apn_settings
        status = f"APN settings set to: {apn_settings.apn_name.value}"
        self.simulate_network_search()
        return f"{status}\nStatus Bar: {self._check_status_bar()}"

    @tool(ToolType.WRITE, "Reset your APN settings to the defaults; this takes effect at the next reboot.")
    def reset_apn_settings(self) -> str:
        self.device.active_apn_settings.reset_at_reboot = True
        self.simulate_network_search()
        return f"APN settings will reset at reboot.\nStatus Bar: {self._check_status_bar()}"

    def break_apn_settings(self) -> str:
        self.device.active_apn_settings.apn_name = APNNames.BROKEN
        self.simulate_network_search()
        return "APN settings broken. Please call reset_apn_settings() to fix."

    def break_apn_mms_setting(self) -> str:
        self.device.active_apn_settings.mmsc_url = None
        return "APN MMS setting broken. Please call reset_apn_settings() to fix."

    # -- Wi-Fi and Wi-Fi calling ----------------------------------------------------------------------
    @tool(ToolType.READ, "Check Wi-Fi: whether it is on, which network it is connected to and the signal.")
    def check_wifi_status(self) -> str:
        d = self.device
        if not d.wifi_enabled:
            return "Wi-Fi is turned OFF."
        if d.wifi_connected:
            return f"Wi-Fi is ON and connected to '{d.wifi_ssid}'. Signal strength: {d.wifi_signal_strength.value}."
        return "Wi-Fi is ON but not connected to any network."

    @tool(ToolType.WRITE, "Turn the Wi-Fi radio on or off.")
    def toggle_wifi(self) -> str:
        state = self._toggle_wifi()
        if state is None:
            return f"Cannot change Wi-Fi settings while Airplane Mode is ON.\nStatus Bar: {self._check_status_bar()}"
        return f"Wi-Fi is now {'ON' if state else 'OFF'}.\nStatus Bar: {self._check_status_bar()}"

    def _toggle_wifi(self) -> bool | None:
        d = self.device
        if d.airplane_mode:
            return None
        state = not d.wifi_enabled
        d.wifi_enabled = state
        if not state:
            d.wifi_connected = False
            d.wifi_ssid = None
            d.wifi_signal_strength = SignalStrength.NONE
        return state

    @tool(ToolType.READ, "Check whether Wi-Fi Calling (calls over Wi-Fi instead of the cellular network) is on.")
    def check_wifi_calling_status(self) -> str:
        return f"Wi-Fi Calling is currently turned {'ON' if self.device.wifi_calling_enabled else 'OFF'}."

    @tool(ToolType.WRITE, "Turn Wi-Fi Calling on or off (calls over Wi-Fi, useful where the cellular signal is "
          "weak).")
    def toggle_wifi_calling(self) -> str:
        state = self._toggle_wifi_calling()
        return f"Wi-Fi Calling is now {'ON' if state else 'OFF'}.\nStatus Bar: {self._check_status_bar()}"

    def _toggle_wifi_calling(self) -> bool:
        state = not self.device.wifi_calling_enabled
        self.device.wifi_calling_enabled = state
        return state

    def set_wifi_calling(self, enabled: bool, mms_over_wifi: bool | None = None) -> str:
        if self.device.wifi_calling_enabled != enabled:
            self._toggle_wifi_calling()
        message = f"Wi-Fi Calling is now {'ON' if enabled else 'OFF'}."
        if mms_over_wifi is not None:
            self.device.wifi_calling_mms_over_wifi = mms_over_wifi
            message += f"\nMMS over Wi-Fi is now {'ON' if mms_over_wifi else 'OFF'}."
        return message

    # -- VPN ----------------------------------------------------------------------------------------
    @tool(ToolType.READ, "Check whether a VPN is on and connected, with its details.")
    def check_vpn_status(self) -> str:
        d = self.device
        if d.vpn_connected:
            details = d.vpn_details.model_dump() if d.vpn_details else None
            if details:
                return f"VPN is ON and connected. Details: {details}"
            return "VPN is ON and connected (no specific details available)."
        if d.vpn_enabled_setting:
            return "VPN is turned ON in settings, but currently not connected."
        return "VPN is turned OFF."

    @tool(ToolType.WRITE, "Connect your VPN.")
    def connect_vpn(self) -> str:
        connected = self._connect_vpn()
        if connected is None:
            return "VPN already connected."
        return f"VPN connected successfully.\nStatus Bar: {self._check_status_bar()}"

    def _connect_vpn(self) -> bool | None:
        if self.device.vpn_connected:
            return None
        self.device.vpn_connected = True
        self.device.vpn_details = self.default_vpn_details
        return True

    @tool(ToolType.WRITE, "Disconnect the VPN, so traffic no longer goes through a VPN server.")
    def disconnect_vpn(self) -> str:
        done = self._disconnect_vpn()
        status = "VPN disconnected successfully." if done else "No active VPN connection to disconnect."
        return f"{status}\nStatus Bar: {self._check_status_bar()}"

    def _disconnect_vpn(self) -> bool:
        if not self.device.vpn_connected:
            return False
        self.device.vpn_connected = False
        self.device.vpn_details = None
        return True

    def break_vpn(self) -> str:
        self.connect_vpn()
        self.device.vpn_details.server_performance = PerformanceLevel.POOR
        return "VPN connection broken."

    # -- apps -----------------------------------------------------------------------------------------
    @tool(ToolType.READ, "List the apps installed on your phone.")
    def check_installed_apps(self) -> str:
        return f"The following apps are installed on the phone: {', '.join(self.device.app_statuses.keys())}"

    @tool(ToolType.READ, "Check an app's status and the permissions it has.",
          app_name=string("The app's name, for example 'messaging'."))
    def check_app_status(self, app_name: str) -> str:
        app = self.device.app_statuses.get(app_name)
        if app is None:
            return f"App '{app_name}' not found on this phone."
        lines = [f"Status for App: {app_name}"]
        allowed = [n.replace("_", " ").lower() for n, on in app.permissions.model_dump().items() if on]
        if not allowed:
            lines.append(" - Permissions: None granted.")
        else:
            lines.append(" - Permissions Granted:")
            lines.extend(f"   - {p}" for p in allowed)
        return "\n".join(lines)

    @tool(ToolType.READ, "Check which permissions an app has (e.g. storage, SMS, phone, network).",
          app_name=string("The app's name, for example 'messaging'."))
    def check_app_permissions(self, app_name: str) -> str:
        app = self.device.app_statuses.get(app_name)
        if app is None:
            return f"App '{app_name}' not found on this phone."
        allowed = [n.replace("_", " ").lower() for n, on in app.permissions.model_dump().items() if on]
        if not allowed:
            return f"App '{app_name}' currently has no permissions granted."
        return f"App '{app_name}' has permission for: {', '.join(allowed)}."

    @tool(ToolType.WRITE, "Give an app a permission it needs.", app_name=string("The app's name."),
          permission=string("The permission, in lowercase, for example 'storage' or 'sms'."))
    def grant_app_permission(self, app_name: str, permission: str) -> str:
        ok, message = self._grant_app_permission(app_name, permission)
        return f"{'Success. ' if ok else 'Error. '}{message}\nStatus Bar: {self._check_status_bar()}"

    def _grant_app_permission(self, app_name: str, permission: str) -> tuple[bool, str]:
        app = self.device.app_statuses.get(app_name)
        permission = permission.lower()
        if app:
            available = list(app.permissions.model_dump().keys())
            if permission not in available:
                return False, (f"Permission '{permission}' not tracked for app '{app_name}', available "
                               f"permissions: {available}")
            setattr(app.permissions, permission, True)
            return True, f"Permission '{permission}' granted to app '{app_name}'."
        return False, f"App '{app_name}' not found. Cannot grant permission."

    def remove_app_permission(self, app_name: str, permission: str) -> tuple[bool, str]:
        app = self.device.app_statuses.get(app_name)
        permission = permission.lower()
        if app:
            if not hasattr(app.permissions, permission):
                return False, f"Permission '{permission}' not tracked for app '{app_name}'."
            setattr(app.permissions, permission, False)
            return True, f"Permission '{permission}' removed from app '{app_name}'."
        return False, f"App '{app_name}' not found. Cannot remove permission."

    # -- MMS ----------------------------------------------------------------------------------------
    @tool(ToolType.READ, "Check whether your messaging app can send MMS (picture) messages.")
    def can_send_mms(self) -> str:
        if self._can_send_mms():
            return "Your messaging app can send MMS messages."
        return "Your messaging app cannot send MMS messages."

    def _can_send_mms(self) -> bool:
        d = self.device
        if not self._get_mobile_data_working():
            return False
        if d.network_technology_connected == NetworkTechnology.TWO_G:
            return False
        if d.wifi_calling_enabled and d.wifi_calling_mms_over_wifi:
            return False
        if d.active_apn_settings.mmsc_url is None:
            return False
        app = d.app_statuses.get("messaging")
        if app is None:
            return False
        return app.permissions.storage and app.permissions.sms

    # -- device ---------------------------------------------------------------------------------------
    @tool(ToolType.WRITE, "Restart your phone; this refreshes its network services and applies a pending APN "
          "reset.")
    def reboot_device(self) -> str:
        lines = []
        if self.device.active_apn_settings.reset_at_reboot:
            lines.append("Resetting APN settings...")
            self.device.active_apn_settings = APNSettings()
        lines.append("Restarting network services...")
        self.device.network_connection_status = NetworkStatus.SEARCHING
        self.simulate_network_search()
        return "\n".join(lines) + f"\nStatus Bar: {self._check_status_bar()}"

    def simulate_network_search(self) -> None:
        """The cellular connection after a network search: from the SIM, the network mode preference and the signal
        of each technology where the user is; airplane mode, a broken APN and an inactive line mean no service."""
        d, s = self.device, self.surroundings
        sim = self._check_sim_status()
        if sim == SimStatus.ACTIVE:
            d.network_connection_status = NetworkStatus.CONNECTED
            pref = d.network_mode_preference
            if pref == NetworkModePreference.FOUR_G_5G_PREFERRED:
                five_g = s.signal_strength.get(NetworkTechnology.FIVE_G, SignalStrength.NONE)
                if five_g == SignalStrength.NONE:
                    d.network_technology_connected = NetworkTechnology.FOUR_G
                    d.network_signal_strength = s.signal_strength.get(NetworkTechnology.FOUR_G, SignalStrength.NONE)
                else:
                    d.network_technology_connected = NetworkTechnology.FIVE_G
                    d.network_signal_strength = five_g
            else:
                tech = _MODE_TO_TECH.get(pref, NetworkTechnology.FOUR_G) if isinstance(
                    pref, NetworkModePreference) else NetworkTechnology.FOUR_G
                d.network_technology_connected = tech
                d.network_signal_strength = s.signal_strength.get(tech, SignalStrength.NONE)
        else:
            self._no_service()
        if d.airplane_mode or d.active_apn_settings.apn_name == APNNames.BROKEN or not s.line_active:
            self._no_service()

    def _no_service(self) -> None:
        self.device.network_connection_status = NetworkStatus.NO_SERVICE
        self.device.network_technology_connected = NetworkTechnology.NONE
        self.device.network_signal_strength = SignalStrength.NONE

    # -- payments -------------------------------------------------------------------------------------
    @tool(ToolType.READ, "Check whether the agent has sent you a request to pay a bill.")
    def check_payment_request(self) -> str:
        request = self.surroundings.payment_request
        if request is None:
            return "No payment request has been made."
        return f"You have a payment request for bill {request.bill_id} of {request.amount_due} USD."

    @tool(ToolType.WRITE, "Pay the bill the agent sent you a payment request for.")
    def make_payment(self) -> str:
        request = self.surroundings.payment_request
        if request is None:
            return "You do not have a payment request."
        request.paid = True
        return f"Payment of {request.amount_due} USD has been made for bill {request.bill_id}."

    # -- assertions (called by tasks) -----------------------------------------------------------------
    def assert_airplane_mode_status(self, expected_status: bool) -> bool:
        return self.device.airplane_mode == expected_status

    def assert_service_status(self, expected_status: str) -> bool:
        return self.device.network_connection_status == NetworkStatus(expected_status)

    def assert_mobile_data_status(self, expected_status: bool) -> bool:
        return self._get_mobile_data_working() == expected_status

    def assert_mobile_roaming_status(self, expected_status: bool) -> bool:
        return self.device.roaming_enabled == expected_status

    def assert_mobile_data_saver_mode_status(self, expected_status: bool) -> bool:
        return self.device.data_saver_mode == expected_status

    def assert_internet_speed(self, expected_speed: float, expected_desc: str | None = None) -> bool:
        speed, desc = self._run_speed_test()
        speed = speed or 0.0
        if expected_desc is None:
            return speed >= expected_speed
        return speed >= expected_speed and desc.lower() == expected_desc.lower()

    def assert_internet_not_excellent(self) -> bool:
        _, desc = self._run_speed_test()
        return desc.lower() != "excellent"

    def assert_can_send_mms(self, expected_status: bool) -> bool:
        return self._can_send_mms() == expected_status

    def assert_mobile_data_usage_exceeded(self, expected_status: bool) -> bool:
        return self.surroundings.mobile_data_usage_exceeded == expected_status


def sync(tools: TelecomTools, user_tools: TelecomUserTools) -> None:
    """Couple the CRM and the phone through the user's phone number: line status → service, roaming allowed, data
    usage exceeded; a paid payment request marks its bill paid; a bill awaiting payment becomes a payment
    request."""
    surroundings = user_tools.db.surroundings
    phone_number = surroundings.phone_number
    if phone_number is None:
        return
    line = tools._get_line_by_phone(phone_number)
    surroundings.line_active = line.status == LineStatus.ACTIVE
    surroundings.roaming_allowed = bool(line.roaming_enabled)
    plan = tools._get_plan_by_id(line.plan_id)
    surroundings.mobile_data_usage_exceeded = line.data_used_gb >= plan.data_limit_gb + line.data_refueling_gb
    request = surroundings.payment_request
    if request is not None and request.paid:
        tools._set_bill_to_paid(request.bill_id)
        surroundings.payment_request = None
    if surroundings.payment_request is None:
        customer = tools.get_customer_by_phone(phone_number)
        bills = tools._get_bills_awaiting_payment(customer)
        if bills:
            surroundings.payment_request = PaymentRequest(bill_id=bills[0].bill_id, amount_due=bills[0].total_due)
