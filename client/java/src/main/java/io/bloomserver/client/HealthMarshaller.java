package io.bloomserver.client;

import com.google.protobuf.CodedInputStream;
import com.google.protobuf.CodedOutputStream;
import io.grpc.MethodDescriptor;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;

/**
 * The wire form of grpc.health.v1's HealthCheckRequest ({@code string service = 1}) and
 * HealthCheckResponse ({@code ServingStatus status = 1}), for {@link BloomClient#health}.
 *
 * <p>Thread-safety: stateless.
 */
final class HealthMarshaller {
  private HealthMarshaller() {}

  static final class Request implements MethodDescriptor.Marshaller<String> {
    @Override
    public InputStream stream(String service) {
      try {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        CodedOutputStream out = CodedOutputStream.newInstance(bytes);
        if (!service.isEmpty()) {
          out.writeString(1, service);
        }
        out.flush();
        return new ByteArrayInputStream(bytes.toByteArray());
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    @Override
    public String parse(InputStream stream) {
      throw new UnsupportedOperationException("a client does not read requests");
    }
  }

  static final class Response implements MethodDescriptor.Marshaller<Integer> {
    @Override
    public InputStream stream(Integer status) {
      throw new UnsupportedOperationException("a client does not write responses");
    }

    @Override
    public Integer parse(InputStream stream) {
      try {
        CodedInputStream in = CodedInputStream.newInstance(stream);
        int status = 0;
        for (int tag = in.readTag(); tag != 0; tag = in.readTag()) {
          if (tag == (1 << 3)) { // field 1, varint
            status = in.readEnum();
          } else if (!in.skipField(tag)) {
            break;
          }
        }
        return status;
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }
}
