import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.LocationProviders;
import org.apache.iceberg.io.LocationProvider;
import org.apache.iceberg.types.Types;

/**
 * Prints where Iceberg's own LocationProviders put files, for the tests to compare with
 * icecore's: arguments are the table location then table properties as key=value; each input
 * line is a file name (newDataLocation(filename)), or a value of the identity partition field
 * `region`, a tab, and a file name (newDataLocation(spec, partition, filename)).
 */
public class LocationProbe {
  public static void main(String[] args) throws Exception {
    Map<String, String> properties = new HashMap<>();
    for (int i = 1; i < args.length; i += 1) {
      int eq = args[i].indexOf('=');
      properties.put(args[i].substring(0, eq), args[i].substring(eq + 1));
    }
    LocationProvider provider = LocationProviders.locationsFor(args[0], properties);
    Schema schema = new Schema(Types.NestedField.optional(1, "region", Types.StringType.get()));
    PartitionSpec spec = PartitionSpec.builderFor(schema).identity("region").build();
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      int tab = line.indexOf('\t');
      if (tab < 0) {
        System.out.println(provider.newDataLocation(line));
      } else {
        Value partition = new Value(line.substring(0, tab));
        System.out.println(provider.newDataLocation(spec, partition, line.substring(tab + 1)));
      }
    }
  }

  /** A partition tuple of one value. */
  private static class Value implements StructLike {
    private Object value;

    Value(Object value) {
      this.value = value;
    }

    @Override
    public int size() {
      return 1;
    }

    @Override
    public <T> T get(int pos, Class<T> javaClass) {
      return javaClass.cast(value);
    }

    @Override
    public <T> void set(int pos, T newValue) {
      this.value = newValue;
    }
  }
}
