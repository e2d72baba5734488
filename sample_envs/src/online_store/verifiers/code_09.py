def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    product = rows(initial_db_path, "SELECT id FROM products WHERE name = 'Summit Trail Backpack 45L'")
    if len(product) != 1:
        return {"result": "others"}
    pid = product[0][0]
    variant = rows(initial_db_path, "SELECT id FROM product_variants WHERE product_id = ? AND color = 'Forest Green'", (pid,))
    if len(variant) != 1:
        return {"result": "others"}
    vid = variant[0][0]
    cart_sql = ("SELECT ci.variant_id, ci.quantity FROM cart_items ci JOIN carts c ON c.id = ci.cart_id "
                "WHERE c.user_id = 1")
    before = dict(rows(initial_db_path, cart_sql))
    after = dict(rows(final_db_path, cart_sql))
    if after.get(vid, 0) != before.get(vid, 0) + 1:
        return {"result": "others"}
    for other, qty in before.items():
        if other != vid and after.get(other) != qty:
            return {"result": "others"}
    wish_sql = "SELECT product_id FROM wishlist_items WHERE user_id = 1"
    wish_before = {r[0] for r in rows(initial_db_path, wish_sql)}
    wish_after = {r[0] for r in rows(final_db_path, wish_sql)}
    if pid not in wish_before or pid in wish_after:
        return {"result": "others"}
    if wish_after != wish_before - {pid}:
        return {"result": "others"}
    return {"result": "complete"}
