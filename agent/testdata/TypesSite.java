import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.net.URI;
import java.nio.file.FileSystem;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.TreeMap;
import java.util.stream.Stream;

// The data-type tests' workload (types_e2e_test.go): prints the instance
// field offsets that Unsafe gives for a few classes ("FIELD class name
// offset"), and their statics ("STATIC class name offset kind mirror
// value": the offset in the class's mirror, the mirror's reference as the
// heap holds it, and the value: the reference as the heap holds it for kind
// L, the number for I and J, "-" otherwise), then READY; on the line "load" from stdin it loads a class the
// agent has not seen (LOADED) and creates an array class (ARRAY); it exits
// at the end of stdin. With the argument "many" it first loads (without
// initializing) the classes of a few JDK modules, for the cost figures.
public class TypesSite {
	static class Base {
		int a;
		long b;
		Object c;
	}

	static class Derived extends Base {
		byte d;
		int e;
		String f;
		long g;
	}

	static class Late {
		long x;
		Object y;
		short z;
	}

	static class Later {
		int q;
	}

	static class Statics {
		static Object a = new Object();
		static long[] b = new long[7];
		static int c = 0x5eed;
		static long d = -42;
		static String e = "static e";
		static Object none;
		long inst;
	}

	static Object keep;

	public static void main(String[] args) throws Exception {
		if (args.length > 0 && args[0].equals("many"))
			loadMany();
		Field uf = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
		uf.setAccessible(true);
		sun.misc.Unsafe u = (sun.misc.Unsafe) uf.get(null);
		TreeMap<Long, Long> tm = new TreeMap<>();
		tm.put(1L, 2L);
		HashMap<Integer, Integer> hm = new HashMap<>();
		hm.put(1, 2);
		keep = new Object[] {tm, hm, new Derived(), new long[3]};
		for (String cn : new String[] {"java.util.TreeMap$Entry", "java.util.HashMap$Node", "java.lang.Long", "TypesSite$Derived"}) {
			Class<?> c = Class.forName(cn);
			for (Class<?> k = c; k != null; k = k.getSuperclass())
				for (Field f : k.getDeclaredFields())
					if (!Modifier.isStatic(f.getModifiers()))
						System.out.println("FIELD " + cn + " " + f.getName() + " " + u.objectFieldOffset(f));
		}
		for (String cn : new String[] {"java.lang.Boolean", "java.lang.Integer", "TypesSite$Statics"}) {
			for (Field f : Class.forName(cn).getDeclaredFields()) {
				if (!Modifier.isStatic(f.getModifiers()))
					continue;
				long off = u.staticFieldOffset(f);
				Object base = u.staticFieldBase(f);
				Class<?> t = f.getType();
				String kind = !t.isPrimitive() ? "L" : t == int.class ? "I" : t == long.class ? "J" : "-";
				long v = kind.equals("L") ? raw(u, u.getObject(base, off))
					: kind.equals("I") ? u.getInt(base, off) : kind.equals("J") ? u.getLong(base, off) : 0;
				System.out.println("STATIC " + cn + " " + f.getName() + " " + off + " " + kind + " " + raw(u, base) + " " + v);
			}
		}
		System.out.println("READY " + System.nanoTime());
		BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
		for (String l; (l = in.readLine()) != null;) {
			if (l.equals("load")) {
				keep = Class.forName("TypesSite$Late").getDeclaredConstructor().newInstance();
				System.out.println("LOADED " + System.nanoTime());
			} else if (l.equals("array")) {
				keep = new Later[2][3];
				System.out.println("ARRAY " + System.nanoTime());
			}
		}
	}

	// The reference to o as the heap holds it: a narrow oop with compressed
	// oops (an Object[]'s element of 4 bytes), else the address.
	static long raw(sun.misc.Unsafe u, Object o) {
		Object[] box = {o};
		long base = u.arrayBaseOffset(Object[].class);
		return u.arrayIndexScale(Object[].class) == 4 ? u.getInt(box, base) & 0xffffffffL : u.getLong(box, base);
	}

	static void loadMany() throws Exception {
		FileSystem fs = FileSystems.getFileSystem(URI.create("jrt:/"));
		int n = 0;
		for (String mod : new String[] {"java.base", "java.sql", "java.xml", "java.logging", "java.net.http"}) {
			try (Stream<Path> s = Files.walk(fs.getPath("/modules", mod))) {
				for (Path p : (Iterable<Path>) s::iterator) {
					String name = p.toString();
					if (!name.endsWith(".class") || name.endsWith("module-info.class") || !name.contains("/java/"))
						continue;
					String cn = name.substring(("/modules/" + mod + "/").length(), name.length() - 6).replace('/', '.');
					try {
						Class.forName(cn, false, ClassLoader.getSystemClassLoader()).getDeclaredFields(); // links, no <clinit>
						n++;
					} catch (Throwable t) {
					}
				}
			}
		}
		System.err.println("loaded " + n);
	}
}
