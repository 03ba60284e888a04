import java.util.Arrays;

import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;

/** A Java job that sets no job description: its annotations must still be readable. */
public class NamesJob {
    public static void main(String[] args) {
        SparkSession spark = SparkSession.builder().appName("sparkscope-test-java-names").getOrCreate();
        JavaSparkContext sc = new JavaSparkContext(spark.sparkContext());
        System.out.println("APP_ID " + sc.sc().applicationId());
        long n = sc.parallelize(Arrays.asList(1, 2, 3, 4, 5, 6, 7, 8), 4).map(x -> x * 2).count();
        System.out.println("COUNT " + n);
        spark.range(0, 1000).createOrReplaceTempView("numbers");
        spark.sql("SELECT id % 7 AS k, count(*) FROM numbers GROUP BY id % 7").collectAsList();
        spark.stop();
    }
}
