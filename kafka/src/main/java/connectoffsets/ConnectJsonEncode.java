package connectoffsets;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.json.JsonConverterConfig;
import org.apache.kafka.connect.storage.OffsetUtils;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Encodes Kafka Connect source offsets with Connect's own JsonConverter, the way
 * OffsetStorageWriter does (schemas.enable=false, key = [connector, partition],
 * value = offset map, null value = tombstone).
 *
 * stdin: JSON Lines, each an object with
 *   "namespace_b64": base64 of the connector name (UTF-8),
 *   "partition": null | [[name_b64, type, value], ...],
 *   "offset":    null | [[name_b64, type, value], ...],
 * type one of null, bool, int, double (IEEE-754 bits, hex), bytes (base64), string (base64 of UTF-8),
 * exactly as in shared/vectors/connect-json.jsonl (other fields are ignored).
 *
 * stdout: one line per input line:
 *   {"key_b64":"...","value_b64":"..."|null,"murmur2":N}
 * or, when the line cannot be encoded (bad input, or Connect's OffsetUtils.validateFormat / the
 * converter refuses it): {"error":"..."}. Blank input lines are skipped.
 *
 * --check: compare against key_b64 / value_b64 / murmur2 fields of the input lines (a vector file)
 * and print a summary to stderr; exit 1 if any differ.
 *
 * Exit status: 0 all lines encoded (and, with --check, all matched), 1 otherwise, 2 bad usage.
 */
public final class ConnectJsonEncode {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        ToolLogging.init("WARN");
        boolean check = false;
        for (String a : args) {
            if (a.equals("--check")) {
                check = true;
            } else if (a.equals("-h") || a.equals("--help")) {
                System.out.println("usage: ConnectJsonEncode [--check] < offsets.jsonl");
                return;
            } else {
                System.err.println("ConnectJsonEncode: unknown argument " + a);
                System.exit(2);
            }
        }

        JsonConverter keyConverter = new JsonConverter();
        keyConverter.configure(Map.of(JsonConverterConfig.SCHEMAS_ENABLE_CONFIG, "false"), true);
        JsonConverter valueConverter = new JsonConverter();
        valueConverter.configure(Map.of(JsonConverterConfig.SCHEMAS_ENABLE_CONFIG, "false"), false);

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
        Base64.Encoder b64 = Base64.getEncoder();

        int lineNo = 0, errors = 0, checked = 0, mismatches = 0;
        String line;
        while ((line = in.readLine()) != null) {
            lineNo++;
            if (line.isBlank()) continue;
            ObjectNode result = MAPPER.createObjectNode();
            JsonNode input = null;
            try {
                input = MAPPER.readTree(line);
                if (input == null || !input.isObject()) throw new IllegalArgumentException("line is not a JSON object");
                String namespace = new String(b64decode(required(input, "namespace_b64").asText()), StandardCharsets.UTF_8);
                Map<String, Object> partition = toMap(input.get("partition"), "partition");
                Map<String, Object> offset = toMap(input.get("offset"), "offset");

                // As OffsetStorageWriter.doFlush does.
                OffsetUtils.validateFormat(partition);
                OffsetUtils.validateFormat(offset);
                byte[] key = keyConverter.fromConnectData(namespace, null, Arrays.asList(namespace, partition));
                byte[] value = valueConverter.fromConnectData(namespace, null, offset);

                result.put("key_b64", b64.encodeToString(key));
                if (value == null) result.putNull("value_b64");
                else result.put("value_b64", b64.encodeToString(value));
                result.put("murmur2", Utils.murmur2(key));
            } catch (Exception e) {
                errors++;
                result.removeAll();
                result.put("error", "line " + lineNo + ": " + e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            if (check) {
                checked++;
                String diff = compare(input, result);
                if (diff != null) {
                    mismatches++;
                    System.err.println("MISMATCH line " + lineNo + ": " + diff);
                }
            }
            out.write(MAPPER.writeValueAsString(result));
            out.write('\n');
            out.flush();
        }
        out.flush();
        if (check) {
            System.err.println("checked " + checked + ": " + (checked - mismatches) + " matched, " + mismatches
                    + " mismatched (java " + System.getProperty("java.version") + ")");
        }
        System.exit(errors > 0 || mismatches > 0 ? 1 : 0);
    }

    private static String compare(JsonNode expected, ObjectNode actual) {
        if (expected == null) return "unparsable input";
        if (actual.has("error")) return actual.get("error").asText();
        StringBuilder sb = new StringBuilder();
        for (String f : new String[] {"key_b64", "value_b64", "murmur2"}) {
            JsonNode e = expected.get(f);
            if (e == null) continue;
            JsonNode a = actual.get(f);
            if (!e.equals(a)) {
                sb.append(f).append(": expected ").append(decodeForHumans(f, e))
                        .append(" got ").append(decodeForHumans(f, a)).append("; ");
            }
        }
        return sb.length() == 0 ? null : sb.toString();
    }

    private static String decodeForHumans(String field, JsonNode n) {
        if (n == null || n.isNull() || !field.endsWith("_b64")) return String.valueOf(n);
        return new String(b64decode(n.asText()), StandardCharsets.UTF_8);
    }

    private static JsonNode required(JsonNode obj, String field) {
        JsonNode n = obj.get(field);
        if (n == null || n.isNull()) throw new IllegalArgumentException("missing field " + field);
        return n;
    }

    private static byte[] b64decode(String s) {
        return Base64.getDecoder().decode(s);
    }

    /** null / missing -> null map; otherwise a list of [name_b64, type, value] in map order. */
    private static Map<String, Object> toMap(JsonNode list, String what) {
        if (list == null || list.isNull()) return null;
        if (!list.isArray()) throw new IllegalArgumentException(what + " is neither null nor a list");
        Map<String, Object> map = new LinkedHashMap<>();
        for (JsonNode entry : list) {
            if (!entry.isArray() || entry.size() != 3)
                throw new IllegalArgumentException(what + ": entry is not [name_b64, type, value]: " + entry);
            String name = new String(b64decode(entry.get(0).asText()), StandardCharsets.UTF_8);
            String type = entry.get(1).asText();
            String v = entry.get(2).isNull() ? "" : entry.get(2).asText();
            Object value;
            switch (type) {
                case "null":
                    value = null;
                    break;
                case "bool":
                    if (!v.equals("true") && !v.equals("false"))
                        throw new IllegalArgumentException(what + ": bad bool " + v);
                    value = Boolean.valueOf(v);
                    break;
                case "int":
                    value = Long.valueOf(v);
                    break;
                case "double":
                    value = Double.longBitsToDouble(Long.parseUnsignedLong(v, 16));
                    break;
                case "bytes":
                    value = b64decode(v);
                    break;
                case "string":
                    value = new String(b64decode(v), StandardCharsets.UTF_8);
                    break;
                default:
                    throw new IllegalArgumentException(what + ": unknown type " + type);
            }
            map.put(name, value);
        }
        return map;
    }
}
