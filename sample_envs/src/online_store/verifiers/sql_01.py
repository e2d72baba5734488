def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = ("SELECT v.sku, v.color, v.price, v.stock_quantity FROM product_variants v JOIN products p ON p.id = v.product_id "
           "WHERE p.name = 'Pulse Bluetooth Speaker' ORDER BY v.id")
    before = fetch(initial_db_path, sql)
    after = fetch(final_db_path, sql)
    in_stock = [r for r in before if r["stock_quantity"] > 0]
    cart_sql = "SELECT ci.variant_id, ci.quantity FROM cart_items ci JOIN carts c ON c.id = ci.cart_id WHERE c.user_id = 1 ORDER BY ci.variant_id"
    return {
        "task": "read-only: which Pulse Bluetooth Speaker color is in stock and its price",
        "expected_answer": in_stock,
        "speaker_variants_initial": before,
        "speaker_variants_final": after,
        "variants_unchanged": before == after,
        "user1_cart_unchanged": fetch(initial_db_path, cart_sql) == fetch(final_db_path, cart_sql),
    }
