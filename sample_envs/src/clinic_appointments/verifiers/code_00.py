def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def _norm(text):
        return re.sub(r"[^a-z0-9]+", " ", (text or "").lower()).strip()

    slot = _rows(final_db_path, "SELECT s.id FROM appointment_slots s JOIN providers p ON p.id = s.provider_id WHERE p.first_name = 'Marcus' AND p.last_name = 'Oyelaran' AND s.start_time LIKE '2026-04-16 10:30%'")
    policy = _rows(final_db_path, "SELECT id FROM insurance_policies WHERE user_id = 1 AND carrier_name = 'Blue Harbor Health' AND plan_name = 'Gold HMO 500'")
    if len(slot) != 1 or len(policy) != 1:
        return {"result": "others"}
    slot_id, policy_id = slot[0][0], policy[0][0]
    initial_ids = {r[0] for r in _rows(initial_db_path, "SELECT id FROM appointments")}
    new_rows = [r for r in _rows(final_db_path, "SELECT id, slot_id, status, reason, appointment_type, insurance_policy_id FROM appointments WHERE user_id = 1") if r[0] not in initial_ids]
    if len(new_rows) != 1:
        return {"result": "others"}
    _, new_slot, status, reason, appt_type, ins_id = new_rows[0]
    if new_slot != slot_id or status != "scheduled" or appt_type != "in_person" or ins_id != policy_id:
        return {"result": "others"}
    if _norm(reason) != "skin rash follow up":
        return {"result": "others"}
    booked = _rows(final_db_path, "SELECT is_booked FROM appointment_slots WHERE id = ?", (slot_id,))
    if not booked or booked[0][0] != 1:
        return {"result": "others"}
    return {"result": "complete"}
