/*
 * Lists a directory the way Apache Iceberg's own orphan removal does, for tests: the files
 * `DeleteOrphanFilesSparkAction` would compare with the table's references, through Iceberg's
 * `FileSystemWalker` (iceberg-core, shared by Spark's action since 1.10): the Hadoop walk the
 * action runs (the driver's first levels, then each remaining directory to the bottom, as its
 * executors do) and the FileIO prefix listing it runs when `usePrefixListing` is set. Both drop
 * hidden paths below the directory (names starting with `.` or `_`).
 *
 * Started by tests/support/iceberg_java/__init__.py:
 *   java ... IcebergJavaOrphanListing <directory>
 * prints one JSON object per listed file: {"hadoop": location} or {"fileio": location}.
 */

import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.hadoop.HadoopFileIO;
import org.apache.iceberg.util.FileSystemWalker;

public class IcebergJavaOrphanListing {
  // DeleteOrphanFilesSparkAction's driver-side limits, then its executors' (to the bottom).
  private static final int DRIVER_DEPTH = 3;
  private static final int DRIVER_SUB_DIRS = 10;
  private static final int TASK_DEPTH = 2000;

  public static void main(String[] args) {
    String dir = args[0];
    Configuration conf = new Configuration();
    List<String> pending = new ArrayList<>();
    List<String> files = new ArrayList<>();
    FileSystemWalker.listDirRecursivelyWithHadoop(
        dir, null, status -> true, conf, DRIVER_DEPTH, DRIVER_SUB_DIRS, pending::add, files::add);
    for (String sub : pending) {
      FileSystemWalker.listDirRecursivelyWithHadoop(
          sub, null, status -> true, conf, TASK_DEPTH, Integer.MAX_VALUE, d -> { }, files::add);
    }
    for (String file : files) {
      System.out.println("{\"hadoop\": \"" + file + "\"}");
    }
    try (HadoopFileIO io = new HadoopFileIO(conf)) {
      FileSystemWalker.listDirRecursivelyWithFileIO(
          io, dir, null, info -> true,
          location -> System.out.println("{\"fileio\": \"" + location + "\"}"));
    }
  }
}
