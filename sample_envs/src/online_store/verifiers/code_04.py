def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    cart_sql = ("SELECT ci.variant_id, ci.quantity FROM cart_items ci JOIN carts c ON c.id = ci.cart_id "
                "WHERE c.user_id = 1 ORDER BY ci.variant_id")
    initial_cart = rows(initial_db_path, cart_sql)
    if not initial_cart:
        return {"result": "others"}
    office = rows(initial_db_path, "SELECT id FROM addresses WHERE user_id = 1 AND label = 'Office'")
    coupon = rows(initial_db_path, "SELECT id FROM coupons WHERE code = 'SPRING15'")
    if len(office) != 1 or len(coupon) != 1:
        return {"result": "others"}
    initial_ids = {r[0] for r in rows(initial_db_path, "SELECT id FROM orders")}
    new_orders = [r for r in rows(final_db_path, "SELECT id, user_id, address_id, coupon_id, status, discount_amount FROM orders")
                  if r[0] not in initial_ids]
    if len(new_orders) != 1:
        return {"result": "others"}
    order_id, user_id, address_id, coupon_id, status, discount = new_orders[0]
    if user_id != 1 or address_id != office[0][0] or coupon_id != coupon[0][0] or status == "cancelled":
        return {"result": "others"}
    if not discount or discount <= 0:
        return {"result": "others"}
    items = rows(final_db_path, "SELECT variant_id, SUM(quantity) FROM order_items WHERE order_id = ? GROUP BY variant_id ORDER BY variant_id", (order_id,))
    if [tuple(r) for r in items] != [tuple(r) for r in initial_cart]:
        return {"result": "others"}
    if rows(final_db_path, cart_sql):
        return {"result": "others"}
    return {"result": "complete"}
