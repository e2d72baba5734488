def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    cart_sql = ("SELECT ci.id, p.name AS product, v.sku, v.color, ci.quantity FROM cart_items ci JOIN carts c ON c.id = ci.cart_id "
                "JOIN product_variants v ON v.id = ci.variant_id JOIN products p ON p.id = v.product_id WHERE c.user_id = 1 ORDER BY ci.id")
    wish_sql = ("SELECT w.id, w.user_id, p.name AS product FROM wishlist_items w JOIN products p ON p.id = w.product_id ORDER BY w.id")
    wish_before = fetch(initial_db_path, wish_sql)
    wish_after = fetch(final_db_path, wish_sql)
    return {
        "task": "move Summit Trail Backpack 45L from user 1's wishlist to the cart (1 unit, Forest Green) and remove it from the wishlist",
        "user1_cart_initial": fetch(initial_db_path, cart_sql),
        "user1_cart_final": fetch(final_db_path, cart_sql),
        "user1_wishlist_initial": [r for r in wish_before if r["user_id"] == 1],
        "user1_wishlist_final": [r for r in wish_after if r["user_id"] == 1],
        "other_users_wishlists_unchanged": [r for r in wish_before if r["user_id"] != 1] == [r for r in wish_after if r["user_id"] != 1],
    }
