def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = ("SELECT c.user_id, ci.id AS cart_item_id, p.name AS product, v.sku, v.color, ci.quantity "
           "FROM cart_items ci JOIN carts c ON c.id = ci.cart_id JOIN product_variants v ON v.id = ci.variant_id "
           "JOIN products p ON p.id = v.product_id ORDER BY c.user_id, ci.id")
    before = fetch(initial_db_path, sql)
    after = fetch(final_db_path, sql)
    return {
        "task": "add 2 White Cedar Ceramic Pour-Over Kettles (SKU CED-KTL-WHT) to user 1's cart",
        "user1_cart_initial": [r for r in before if r["user_id"] == 1],
        "user1_cart_final": [r for r in after if r["user_id"] == 1],
        "kettle_lines_user1_final": [r for r in after if r["user_id"] == 1 and r["product"] == "Cedar Ceramic Pour-Over Kettle"],
        "other_users_carts_unchanged": [r for r in before if r["user_id"] != 1] == [r for r in after if r["user_id"] != 1],
    }
