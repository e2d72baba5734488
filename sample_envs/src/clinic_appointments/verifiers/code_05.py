def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    helen = "SELECT id FROM providers WHERE first_name = 'Helen' AND last_name = 'Vasquez'"
    provider = _rows(final_db_path, helen)
    if len(provider) != 1:
        return {"result": "others"}
    provider_id = provider[0][0]
    slot = _rows(final_db_path, "SELECT id, is_booked FROM appointment_slots WHERE provider_id = ? AND start_time LIKE '2026-04-22 14:00%'", (provider_id,))
    if len(slot) != 1 or slot[0][1] != 1:
        return {"result": "others"}
    target_slot = slot[0][0]
    original = _rows(initial_db_path, "SELECT id FROM appointments WHERE user_id = 1 AND provider_id = ? AND status = 'scheduled' AND scheduled_start LIKE '2026-04-20%'", (provider_id,))
    if len(original) != 1:
        return {"result": "others"}
    appt_id = original[0][0]
    moved = _rows(final_db_path, "SELECT status, slot_id, scheduled_start FROM appointments WHERE id = ?", (appt_id,))
    if not moved:
        return {"result": "others"}
    status, slot_id, start = moved[0]
    if status == "scheduled" and slot_id == target_slot and str(start).startswith("2026-04-22 14:00"):
        return {"result": "complete"}
    if status == "cancelled":
        initial_ids = {r[0] for r in _rows(initial_db_path, "SELECT id FROM appointments")}
        rebooked = [r for r in _rows(final_db_path, "SELECT id FROM appointments WHERE user_id = 1 AND slot_id = ? AND status = 'scheduled'", (target_slot,)) if r[0] not in initial_ids]
        if len(rebooked) == 1:
            return {"result": "complete"}
    return {"result": "others"}
