def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    cart_sql = ("SELECT ci.variant_id, v.sku, p.name AS product, ci.quantity, v.price FROM cart_items ci JOIN carts c ON c.id = ci.cart_id "
                "JOIN product_variants v ON v.id = ci.variant_id JOIN products p ON p.id = v.product_id WHERE c.user_id = 1 ORDER BY ci.variant_id")
    order_sql = ("SELECT o.id, o.order_number, o.user_id, o.status, a.label AS address_label, c.code AS coupon_code, o.subtotal, "
                 "o.discount_amount, o.shipping_fee, o.total FROM orders o LEFT JOIN addresses a ON a.id = o.address_id "
                 "LEFT JOIN coupons c ON c.id = o.coupon_id ORDER BY o.id")
    initial_ids = {r["id"] for r in fetch(initial_db_path, order_sql)}
    new_orders = [r for r in fetch(final_db_path, order_sql) if r["id"] not in initial_ids]
    new_items = {}
    for o in new_orders:
        new_items[o["order_number"]] = fetch(final_db_path, "SELECT variant_id, product_name, quantity, unit_price FROM order_items WHERE order_id = ? ORDER BY id", (o["id"],))
    stock_sql = "SELECT id, sku, stock_quantity FROM product_variants ORDER BY id"
    stock_before = {r["sku"]: r["stock_quantity"] for r in fetch(initial_db_path, stock_sql)}
    stock_after = {r["sku"]: r["stock_quantity"] for r in fetch(final_db_path, stock_sql)}
    return {
        "task": "check out user 1's cart to the Office address with coupon SPRING15",
        "user1_cart_initial": fetch(initial_db_path, cart_sql),
        "user1_cart_final": fetch(final_db_path, cart_sql),
        "user1_addresses": fetch(initial_db_path, "SELECT id, label, city FROM addresses WHERE user_id = 1 ORDER BY id"),
        "coupon_spring15": fetch(initial_db_path, "SELECT id, code, discount_type, discount_value, min_order_total, is_active FROM coupons WHERE code = 'SPRING15'"),
        "new_orders": new_orders,
        "new_order_items": new_items,
        "stock_changes": {k: [stock_before.get(k), v] for k, v in stock_after.items() if stock_before.get(k) != v},
    }
