/*
 * Reads an Iceberg table with Apache Iceberg's own Java library, for tests: the table named by
 * a metadata JSON file (StaticTableOperations, HadoopFileIO), planned by Iceberg's scan planning
 * and read with its generic readers (IcebergGenerics), every delete applied as Iceberg applies
 * it (position deletes, equality deletes, deletion vectors).
 *
 * Started by tests/support/iceberg_java/__init__.py:
 *   java ... IcebergJavaReader <metadata.json> [column ...]
 * prints one JSON object per line: {"file": [data file, delete file, ...], "first_row_id": n}
 * for each planned file with the deletes Iceberg applies to it and the first row id Iceberg
 * gives it (v3 row lineage; null before v3), then {"row": [value, ...]} for each row (only the
 * columns named, in that order, when any are).
 * Values: numbers and strings as JSON; dates as days, times and timestamps as microseconds
 * since the epoch; anything else as its toString().
 */

import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.BaseTable;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.StaticTableOperations;
import org.apache.iceberg.Table;
import org.apache.iceberg.data.IcebergGenerics;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.hadoop.HadoopFileIO;
import org.apache.iceberg.io.CloseableIterable;

public class IcebergJavaReader {
  private static final LocalDateTime EPOCH = LocalDateTime.of(1970, 1, 1, 0, 0);

  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: IcebergJavaReader <metadata.json> [column ...]");
      System.exit(2);
    }
    HadoopFileIO io = new HadoopFileIO(new Configuration());
    Table table = new BaseTable(new StaticTableOperations(args[0], io), "java-reader");
    StringBuilder out = new StringBuilder();
    try (CloseableIterable<FileScanTask> tasks = table.newScan().planFiles()) {
      for (FileScanTask task : tasks) {
        List<Object> line = new ArrayList<>();
        line.add(task.file().location());
        for (DeleteFile delete : task.deletes()) {
          line.add(delete.location());
        }
        out.append("{\"file\": ").append(json(line));
        out.append(", \"first_row_id\": ").append(value(task.file().firstRowId())).append("}\n");
      }
    }
    IcebergGenerics.ScanBuilder scan = IcebergGenerics.read(table);
    List<String> columns = new ArrayList<>();
    if (args.length > 1) {
      columns.addAll(Arrays.asList(args).subList(1, args.length));
      scan = scan.select(columns.toArray(new String[0]));
    } else {
      table.schema().columns().forEach(field -> columns.add(field.name()));
    }
    try (CloseableIterable<Record> rows = scan.build()) {
      for (Record row : rows) {
        // By name: a reader applying deletes adds columns of its own (_pos, keys) to records.
        List<Object> line = new ArrayList<>();
        for (String column : columns) {
          line.add(row.getField(column));
        }
        out.append("{\"row\": ").append(json(line)).append("}\n");
      }
    }
    System.out.print(out);
    System.out.flush();
  }

  private static String json(List<Object> values) {
    StringBuilder out = new StringBuilder("[");
    for (int i = 0; i < values.size(); i++) {
      if (i > 0) {
        out.append(',');
      }
      out.append(value(values.get(i)));
    }
    return out.append(']').toString();
  }

  private static String value(Object value) {
    if (value == null) {
      return "null";
    } else if (value instanceof Number || value instanceof Boolean) {
      return value.toString();
    } else if (value instanceof LocalDateTime) {
      return Long.toString(ChronoUnit.MICROS.between(EPOCH, (LocalDateTime) value));
    } else if (value instanceof OffsetDateTime) {
      LocalDateTime utc = ((OffsetDateTime) value).withOffsetSameInstant(ZoneOffset.UTC).toLocalDateTime();
      return Long.toString(ChronoUnit.MICROS.between(EPOCH, utc));
    } else if (value instanceof LocalDate) {
      return Long.toString(((LocalDate) value).toEpochDay());
    } else if (value instanceof LocalTime) {
      return Long.toString(((LocalTime) value).toNanoOfDay() / 1000);
    }
    return quoted(value.toString());
  }

  private static String quoted(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    return out.append('"').toString();
  }
}
