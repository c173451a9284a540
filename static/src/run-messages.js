// The messages the page may send on /ws/run, checked against the server's
// own table (run-messages.json, made from server/runs/messages.py): a
// message that does not fit is a bug of the page, thrown here rather than
// refused by the server. Plain JavaScript with no browser in it, so that
// tests/test_run_messages.py runs it under node against the server's check.
import SCHEMA from "./run-messages.json" with { type: "json" };

const HALF_A_CHARACTER = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/; // a lone surrogate

/** Why `value` does not fit `field` of the table, or "". */
function misfit(value, field) {
  if (value === undefined || value === null) {
    return field.required || (value === null && !field.null) ? "is missing (or null)" : "";
  }
  switch (field.json) {
    case "string":
      if (typeof value !== "string") return "is not text";
      if (field.max_length !== undefined && value.length > field.max_length) return "is too long";
      if (field.min_length !== undefined && value.length < field.min_length) return "is too short";
      if (field.pattern && !new RegExp(`^(?:${field.pattern})$`).test(value)) return "does not match its pattern";
      if (field.plain && (value.includes("\0") || HALF_A_CHARACTER.test(value))) return "holds a NUL or half a character";
      return "";
    case "integer":
      return Number.isInteger(value) && value >= field.min && value <= field.max ? "" : "is out of bounds";
    case "array":
      if (!Array.isArray(value) || (field.max_items !== undefined && value.length > field.max_items)) return "is not a short list";
      return field.items && value.some((v) => misfit(v, field.items)) ? "has a bad item" : "";
    case "object":
      return value && typeof value === "object" && !Array.isArray(value)
        && (field.max_items === undefined || Object.keys(value).length <= field.max_items) ? "" : "is not a small object";
    default:
      return "has a type the table does not know";
  }
}

/** The message `type` with `fields` and `id`, as the protocol's table allows; throws (a bug of the page) if not. */
export function runMessage(type, fields, id) {
  const table = SCHEMA.messages[type];
  if (!table) throw new Error(`run socket: no message type ${type}`);
  const msg = { type, id, ...fields };
  const wrong = [["id", SCHEMA.id], ...Object.entries(table)].map(([name, field]) => [name, misfit(msg[name], field)])
    .concat(Object.keys(fields).filter((name) => !(name in table)).map((name) => [name, "is not one of its fields"]))
    .find(([, why]) => why);
  if (wrong) throw new Error(`run socket: the ${type} message's ${wrong[0]} ${wrong[1]}`);
  return msg;
}
