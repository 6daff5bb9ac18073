// FftBench runs Apache Commons Math's FFT (Debian's libcommons-math3-java)
// over signals a service would hold: SIGNALS arrays of 2^LOG2 samples built
// at start-up, then ROUNDS rounds that transform each one forward (the
// library allocates a Complex per point) and keep a spectrum statistic.
// It prints "ops N" after each round and "done CHECKSUM".
//
// Usage: java -cp /usr/share/java/commons-math3.jar:. FftBench [SIGNALS] [LOG2] [ROUNDS]
import org.apache.commons.math3.complex.Complex;
import org.apache.commons.math3.transform.DftNormalization;
import org.apache.commons.math3.transform.FastFourierTransformer;
import org.apache.commons.math3.transform.TransformType;

public class FftBench {
    public static void main(String[] args) {
        int signals = args.length > 0 ? Integer.parseInt(args[0]) : 64;
        int n = 1 << (args.length > 1 ? Integer.parseInt(args[1]) : 14);
        int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 20;
        double[][] in = new double[signals][n];
        long s = 0x9E3779B97F4A7C15L;
        for (double[] x : in) {
            for (int i = 0; i < n; i++) {
                s = s * 6364136223846793005L + 1442695040888963407L;
                x[i] = Math.sin(i * 0.01 * (1 + (s >>> 60))) + (s >>> 11) * 0x1.0p-53;
            }
        }
        FastFourierTransformer fft = new FastFourierTransformer(DftNormalization.STANDARD);
        double check = 0;
        for (int r = 0; r < rounds; r++) {
            for (double[] x : in) {
                Complex[] y = fft.transform(x, TransformType.FORWARD);
                check += y[(r * 31) & (n - 1)].abs();
            }
            System.out.println("ops " + (r + 1));
        }
        System.out.println("done " + (long) check);
    }
}
