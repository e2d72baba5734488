"""The retail domain's tools (spec §3.2): 16 tools over ``RetailDB`` with τ²-bench's effects, errors and quirks:
exact status gates ("pending" vs. containing "pending"), every modified item taking the price and options of the
*last* new variant checked, sorted exchange and return lists, gift-card amounts rounded to 2 decimals, the two
allowed cancellation reasons. ``get_item_details`` searches every product, as at τ²-bench HEAD."""
from __future__ import annotations

import json

from awm_engine.bench.tau2.models import GiftCard, OrderPayment, UserAddress
from awm_engine.bench.tau2.toolkit import (
    CALCULATE_DESCRIPTION,
    CALCULATE_PARAMS,
    TRANSFER_DESCRIPTION,
    TRANSFER_PARAMS,
    Toolkit,
    ToolType,
    array,
    calculate_expression,
    string,
    tool,
)

_ORDER_ID = string("The order id, which starts with '#', for example '#W0000000'.")
_USER_ID = string("The customer's user id, for example 'sara_doe_496'.")
_PAYMENT = string("A payment method id from the customer's profile, for example 'gift_card_0000000' or "
                  "'credit_card_0000000'.")
_ITEM_IDS = array("Item ids (variant ids, not product ids); an id may appear more than once.",
                  string("An item id, for example '1008292230'."))
_ADDRESS = {"address1": string("First address line, for example '123 Main St'."),
            "address2": string("Second address line, for example 'Apt 1', or an empty string."),
            "city": string("City."), "state": string("State, for example 'CA'."),
            "country": string("Country, for example 'USA'."), "zip": string("Zip code, for example '12345'.")}


class RetailTools(Toolkit):
    """All the tools of the retail domain."""

    def _get_order(self, order_id: str):
        if order_id not in self.db.orders:
            raise ValueError("Order not found")
        return self.db.orders[order_id]

    def _get_user(self, user_id: str):
        if user_id not in self.db.users:
            raise ValueError("User not found")
        return self.db.users[user_id]

    def _get_product(self, product_id: str):
        if product_id not in self.db.products:
            raise ValueError("Product not found")
        return self.db.products[product_id]

    def _get_item(self, item_id: str):
        for product in self.db.products.values():
            if item_id in product.variants:
                return product.variants[item_id]
        raise ValueError("Item not found")

    def _get_variant(self, product_id: str, variant_id: str):
        product = self._get_product(product_id)
        if variant_id not in product.variants:
            raise ValueError("Variant not found")
        return product.variants[variant_id]

    def _get_payment_method(self, user_id: str, payment_method_id: str):
        user = self._get_user(user_id)
        if payment_method_id not in user.payment_methods:
            raise ValueError("Payment method not found")
        return user.payment_methods[payment_method_id]

    @staticmethod
    def _is_pending_order(order) -> bool:
        return "pending" in order.status

    @staticmethod
    def _check_item_counts(order, item_ids: list, error) -> None:
        """Each id may be listed at most as many times as the order holds it (``error(id)``: the message)."""
        all_item_ids = [item.item_id for item in order.items]
        for item_id in item_ids:
            if item_ids.count(item_id) > all_item_ids.count(item_id):
                raise ValueError(error(item_id))

    def _new_variant(self, order, item_id: str, new_item_id: str):
        """The order's item ``item_id`` and the available variant ``new_item_id`` of the same product."""
        item = next((i for i in order.items if i.item_id == item_id), None)
        if item is None:
            raise ValueError(f"Item {item_id} not found")
        variant = self._get_variant(item.product_id, new_item_id)
        if not variant.available:
            raise ValueError(f"New item {new_item_id} not found or available")
        return item, variant

    @tool(ToolType.GENERIC, CALCULATE_DESCRIPTION, **CALCULATE_PARAMS)
    def calculate(self, expression: str) -> str:
        return calculate_expression(expression)

    @tool(ToolType.WRITE, "Cancel an order that is still pending (processed or delivered orders cannot be "
          "cancelled). Every payment is refunded: to a gift card at once, otherwise in 5-7 business days. Explain "
          "the cancellation and get the customer's explicit yes first. Returns the order after cancellation.",
          order_id=_ORDER_ID, reason={"type": "string", "enum": ["no longer needed", "ordered by mistake"],
                                      "description": "Why the order is cancelled."})
    def cancel_pending_order(self, order_id: str, reason: str):
        order = self._get_order(order_id)
        if order.status != "pending":
            raise ValueError("Non-pending order cannot be cancelled")
        if reason not in {"no longer needed", "ordered by mistake"}:
            raise ValueError("Invalid reason")
        refunds = []
        for payment in order.payment_history:
            payment_id = payment.payment_method_id
            refunds.append(OrderPayment(transaction_type="refund", amount=payment.amount,
                                        payment_method_id=payment_id))
            user = self._get_user(order.user_id)
            method = self._get_payment_method(user.user_id, payment_id)
            if isinstance(method, GiftCard):
                method.balance += payment.amount
                method.balance = round(method.balance, 2)
        order.status = "cancelled"
        order.cancel_reason = reason
        order.payment_history.extend(refunds)
        return order

    @tool(ToolType.WRITE, "Request an exchange of items of a delivered order for other variants of the same "
          "products (a delivered order can be returned or exchanged only once). The price difference is settled "
          "with the given payment method. Explain the exchange and get the customer's explicit yes first.",
          order_id=_ORDER_ID, item_ids=_ITEM_IDS,
          new_item_ids=array("The new item ids, position by position matching item_ids, each a variant of the "
                             "same product.", string("An item id.")),
          payment_method_id=_PAYMENT)
    def exchange_delivered_order_items(self, order_id: str, item_ids: list, new_item_ids: list,
                                       payment_method_id: str):
        order = self._get_order(order_id)
        if order.status != "delivered":
            raise ValueError("Non-delivered order cannot be exchanged")
        self._check_item_counts(order, item_ids, lambda item_id: f"Number of {item_id} not found.")
        if len(item_ids) != len(new_item_ids):
            raise ValueError("The number of items to be exchanged should match.")
        diff_price = 0
        for item_id, new_item_id in zip(item_ids, new_item_ids):
            item, variant = self._new_variant(order, item_id, new_item_id)
            diff_price += variant.price - item.price
        diff_price = round(diff_price, 2)
        method = self._get_payment_method(order.user_id, payment_method_id)
        if isinstance(method, GiftCard) and method.balance < diff_price:
            raise ValueError("Insufficient gift card balance to pay for the price difference")
        order.status = "exchange requested"
        order.exchange_items = sorted(item_ids)
        order.exchange_new_items = sorted(new_item_ids)
        order.exchange_payment_method_id = payment_method_id
        order.exchange_price_difference = diff_price
        return order

    @tool(ToolType.READ, "Find a customer's user id from first name, last name and zip code. Prefer looking the "
          "customer up by email; use this when the email is unknown.",
          first_name=string("First name, for example 'John'."), last_name=string("Last name, for example 'Doe'."),
          zip=string("Zip code, for example '12345'."))
    def find_user_id_by_name_zip(self, first_name: str, last_name: str, zip: str) -> str:
        for user_id, user in self.db.users.items():
            if (user.name.first_name.lower() == first_name.lower()
                    and user.name.last_name.lower() == last_name.lower() and user.address.zip == zip):
                return user_id
        raise ValueError("User not found")

    @tool(ToolType.READ, "Find a customer's user id from their email address.",
          email=string("The email address, for example 'someone@example.com'."))
    def find_user_id_by_email(self, email: str) -> str:
        for user_id, user in self.db.users.items():
            if user.email.lower() == email.lower():
                return user_id
        raise ValueError("User not found")

    @tool(ToolType.READ, "Look up an order: status, items, address, shipments and payments.", order_id=_ORDER_ID)
    def get_order_details(self, order_id: str):
        return self._get_order(order_id)

    @tool(ToolType.READ, "Look up a product type and every variant of it (item id, options, availability, price).",
          product_id=string("The product id, for example '6086499569' (not an item id)."))
    def get_product_details(self, product_id: str):
        return self._get_product(product_id)

    @tool(ToolType.READ, "Look up one item (a variant of some product): options, availability and price.",
          item_id=string("The item id, for example '6086499569' (not a product id)."))
    def get_item_details(self, item_id: str):
        return self._get_item(item_id)

    @tool(ToolType.READ, "Look up a customer's profile: name, address, email, payment methods and order ids.",
          user_id=_USER_ID)
    def get_user_details(self, user_id: str):
        return self._get_user(user_id)

    @tool(ToolType.READ, "List the store's 50 product types: a JSON object mapping each product name to its "
          "product id, sorted by name.")
    def list_all_product_types(self) -> str:
        return json.dumps({p.name: p.product_id for p in self.db.products.values()}, sort_keys=True)

    @tool(ToolType.WRITE, "Change the shipping address of a pending order. Explain the change and get the "
          "customer's explicit yes first.", order_id=_ORDER_ID, **_ADDRESS)
    def modify_pending_order_address(self, order_id: str, address1: str, address2: str, city: str, state: str,
                                     country: str, zip: str):
        order = self._get_order(order_id)
        if not self._is_pending_order(order):
            raise ValueError("Non-pending order cannot be modified")
        order.address = UserAddress(address1=address1, address2=address2, city=city, state=state,
                                    country=country, zip=zip)
        return order

    @tool(ToolType.WRITE, "Swap items of a pending order for other variants of the same products. An order's "
          "items can be modified only once. The price difference is paid or refunded with the given payment "
          "method. Explain the change and get the customer's explicit yes first.",
          order_id=_ORDER_ID, item_ids=_ITEM_IDS,
          new_item_ids=array("The new item ids, position by position matching item_ids, each a different variant "
                             "of the same product.", string("An item id.")),
          payment_method_id=_PAYMENT)
    def modify_pending_order_items(self, order_id: str, item_ids: list, new_item_ids: list,
                                   payment_method_id: str):
        order = self._get_order(order_id)
        if order.status != "pending":
            raise ValueError("Non-pending order cannot be modified")
        self._check_item_counts(order, item_ids, lambda item_id: f"{item_id} not found")
        if len(item_ids) != len(new_item_ids):
            raise ValueError("The number of items to be exchanged should match")
        diff_price = 0
        variant = None
        for item_id, new_item_id in zip(item_ids, new_item_ids):
            if item_id == new_item_id:
                raise ValueError("The new item id should be different from the old item id")
            item, variant = self._new_variant(order, item_id, new_item_id)
            diff_price += variant.price - item.price
        method = self._get_payment_method(order.user_id, payment_method_id)
        if isinstance(method, GiftCard) and method.balance < diff_price:
            raise ValueError("Insufficient gift card balance to pay for the new item")
        order.payment_history.append(OrderPayment(transaction_type="payment" if diff_price > 0 else "refund",
                                                  amount=abs(diff_price), payment_method_id=payment_method_id))
        if isinstance(method, GiftCard):
            method.balance -= diff_price
            method.balance = round(method.balance, 2)
        for item_id, new_item_id in zip(item_ids, new_item_ids):
            item = next((i for i in order.items if i.item_id == item_id), None)
            if item is None:
                raise ValueError(f"Item {item_id} not found")
            item.item_id = new_item_id
            item.price = variant.price  # the last variant checked, for every item (τ-bench's quirk)
            item.options = variant.options
        order.status = "pending (item modified)"
        return order

    @tool(ToolType.WRITE, "Change the payment method of a pending order paid with a single payment: the new method "
          "is charged and the old one refunded. Explain the change and get the customer's explicit yes first.",
          order_id=_ORDER_ID, payment_method_id=_PAYMENT)
    def modify_pending_order_payment(self, order_id: str, payment_method_id: str):
        order = self._get_order(order_id)
        if not self._is_pending_order(order):
            raise ValueError("Non-pending order cannot be modified")
        method = self._get_payment_method(order.user_id, payment_method_id)
        if len(order.payment_history) != 1 or order.payment_history[0].transaction_type != "payment":
            raise ValueError("There should be exactly one payment for a pending order")
        if order.payment_history[0].payment_method_id == payment_method_id:
            raise ValueError("The new payment method should be different from the current one")
        amount = order.payment_history[0].amount
        if isinstance(method, GiftCard) and method.balance < amount:
            raise ValueError("Insufficient gift card balance to pay for the order")
        order.payment_history.extend([
            OrderPayment(transaction_type="payment", amount=amount, payment_method_id=payment_method_id),
            OrderPayment(transaction_type="refund", amount=amount,
                         payment_method_id=order.payment_history[0].payment_method_id)])
        if isinstance(method, GiftCard):
            method.balance -= amount
            method.balance = round(method.balance, 2)
        old = self._get_payment_method(order.user_id, order.payment_history[0].payment_method_id)
        if isinstance(old, GiftCard):
            old.balance += amount
            old.balance = round(old.balance, 2)
        return order

    @tool(ToolType.WRITE, "Change a customer's default address. Explain the change and get the customer's "
          "explicit yes first.", user_id=_USER_ID, **_ADDRESS)
    def modify_user_address(self, user_id: str, address1: str, address2: str, city: str, state: str, country: str,
                            zip: str):
        user = self._get_user(user_id)
        user.address = UserAddress(address1=address1, address2=address2, city=city, state=state, country=country,
                                   zip=zip)
        return user

    @tool(ToolType.WRITE, "Request a return of items of a delivered order; the customer gets an email about how to "
          "send them back. The refund goes to the original payment method or to a gift card. Explain the return "
          "and get the customer's explicit yes first.", order_id=_ORDER_ID, item_ids=_ITEM_IDS,
          payment_method_id=string("Where the refund goes: the order's original payment method or a gift card."))
    def return_delivered_order_items(self, order_id: str, item_ids: list, payment_method_id: str):
        order = self._get_order(order_id)
        if order.status != "delivered":
            raise ValueError("Non-delivered order cannot be returned")
        user = self._get_user(order.user_id)
        method = self._get_payment_method(user.user_id, payment_method_id)
        if not isinstance(method, GiftCard) and payment_method_id != order.payment_history[0].payment_method_id:
            raise ValueError("Payment method should be the original payment method")
        self._check_item_counts(order, item_ids, lambda item_id: "Some item not found")
        order.status = "return requested"
        order.return_items = sorted(item_ids)
        order.return_payment_method_id = payment_method_id
        return order

    @tool(ToolType.GENERIC, TRANSFER_DESCRIPTION, **TRANSFER_PARAMS)
    def transfer_to_human_agents(self, summary: str) -> str:
        return "Transfer successful"
