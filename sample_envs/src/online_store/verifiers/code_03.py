def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    sql = ("SELECT ci.variant_id, ci.quantity FROM cart_items ci JOIN carts c ON c.id = ci.cart_id "
           "WHERE c.user_id = 1")
    variant_sql = ("SELECT v.id FROM product_variants v JOIN products p ON p.id = v.product_id "
                   "WHERE p.name = 'Cedar Ceramic Pour-Over Kettle' AND lower(v.color) = 'white'")
    others_sql = ("SELECT ci.id, ci.cart_id, ci.variant_id, ci.quantity FROM cart_items ci JOIN carts c ON c.id = ci.cart_id "
                  "WHERE c.user_id != 1 ORDER BY ci.id")
    target = rows(initial_db_path, variant_sql)
    if len(target) != 1:
        return {"result": "others"}
    variant_id = target[0][0]
    before = dict(rows(initial_db_path, sql))
    after = dict(rows(final_db_path, sql))
    if after.get(variant_id, 0) != before.get(variant_id, 0) + 2:
        return {"result": "others"}
    for vid, qty in before.items():
        if vid != variant_id and after.get(vid) != qty:
            return {"result": "others"}
    for vid in after:
        if vid != variant_id and vid not in before:
            return {"result": "others"}
    if rows(initial_db_path, others_sql) != rows(final_db_path, others_sql):
        return {"result": "others"}
    return {"result": "complete"}
