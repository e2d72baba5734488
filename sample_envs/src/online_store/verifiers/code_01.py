def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    sql = ("SELECT v.color, v.price, v.stock_quantity FROM product_variants v JOIN products p ON p.id = v.product_id "
           "WHERE p.name = 'Pulse Bluetooth Speaker' ORDER BY v.id")
    before = rows(initial_db_path, sql)
    after = rows(final_db_path, sql)
    if not before or before != after:
        return {"result": "others"}
    in_stock = [r for r in before if r[2] > 0]
    if len(in_stock) != 1:
        return {"result": "others"}
    color, price, _ = in_stock[0]
    text = (final_answer or "").lower().replace("$", "").replace(",", "")
    if not re.search(r"\b" + re.escape(color.lower()) + r"\b", text):
        return {"result": "others"}
    amounts = [float(m) for m in re.findall(r"\d+(?:\.\d+)?", text)]
    if not any(abs(a - float(price)) < 0.005 for a in amounts):
        return {"result": "others"}
    return {"result": "complete"}
