package io.bloomserver.bloom.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * Named, persistent, scalable Bloom filters.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class BloomFilterServiceGrpc {

  private BloomFilterServiceGrpc() {}

  public static final String SERVICE_NAME = "bloom.v1.BloomFilterService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.ReserveRequest,
      io.bloomserver.bloom.v1.ReserveResponse> getReserveMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Reserve",
      requestType = io.bloomserver.bloom.v1.ReserveRequest.class,
      responseType = io.bloomserver.bloom.v1.ReserveResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.ReserveRequest,
      io.bloomserver.bloom.v1.ReserveResponse> getReserveMethod() {
    io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.ReserveRequest, io.bloomserver.bloom.v1.ReserveResponse> getReserveMethod;
    if ((getReserveMethod = BloomFilterServiceGrpc.getReserveMethod) == null) {
      synchronized (BloomFilterServiceGrpc.class) {
        if ((getReserveMethod = BloomFilterServiceGrpc.getReserveMethod) == null) {
          BloomFilterServiceGrpc.getReserveMethod = getReserveMethod =
              io.grpc.MethodDescriptor.<io.bloomserver.bloom.v1.ReserveRequest, io.bloomserver.bloom.v1.ReserveResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Reserve"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.ReserveRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.ReserveResponse.getDefaultInstance()))
              .setSchemaDescriptor(new BloomFilterServiceMethodDescriptorSupplier("Reserve"))
              .build();
        }
      }
    }
    return getReserveMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.AddRequest,
      io.bloomserver.bloom.v1.AddResponse> getAddMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Add",
      requestType = io.bloomserver.bloom.v1.AddRequest.class,
      responseType = io.bloomserver.bloom.v1.AddResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.AddRequest,
      io.bloomserver.bloom.v1.AddResponse> getAddMethod() {
    io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.AddRequest, io.bloomserver.bloom.v1.AddResponse> getAddMethod;
    if ((getAddMethod = BloomFilterServiceGrpc.getAddMethod) == null) {
      synchronized (BloomFilterServiceGrpc.class) {
        if ((getAddMethod = BloomFilterServiceGrpc.getAddMethod) == null) {
          BloomFilterServiceGrpc.getAddMethod = getAddMethod =
              io.grpc.MethodDescriptor.<io.bloomserver.bloom.v1.AddRequest, io.bloomserver.bloom.v1.AddResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Add"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.AddRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.AddResponse.getDefaultInstance()))
              .setSchemaDescriptor(new BloomFilterServiceMethodDescriptorSupplier("Add"))
              .build();
        }
      }
    }
    return getAddMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.MightContainRequest,
      io.bloomserver.bloom.v1.MightContainResponse> getMightContainMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "MightContain",
      requestType = io.bloomserver.bloom.v1.MightContainRequest.class,
      responseType = io.bloomserver.bloom.v1.MightContainResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.MightContainRequest,
      io.bloomserver.bloom.v1.MightContainResponse> getMightContainMethod() {
    io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.MightContainRequest, io.bloomserver.bloom.v1.MightContainResponse> getMightContainMethod;
    if ((getMightContainMethod = BloomFilterServiceGrpc.getMightContainMethod) == null) {
      synchronized (BloomFilterServiceGrpc.class) {
        if ((getMightContainMethod = BloomFilterServiceGrpc.getMightContainMethod) == null) {
          BloomFilterServiceGrpc.getMightContainMethod = getMightContainMethod =
              io.grpc.MethodDescriptor.<io.bloomserver.bloom.v1.MightContainRequest, io.bloomserver.bloom.v1.MightContainResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "MightContain"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.MightContainRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.MightContainResponse.getDefaultInstance()))
              .setSchemaDescriptor(new BloomFilterServiceMethodDescriptorSupplier("MightContain"))
              .build();
        }
      }
    }
    return getMightContainMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.StatsRequest,
      io.bloomserver.bloom.v1.StatsResponse> getStatsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Stats",
      requestType = io.bloomserver.bloom.v1.StatsRequest.class,
      responseType = io.bloomserver.bloom.v1.StatsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.StatsRequest,
      io.bloomserver.bloom.v1.StatsResponse> getStatsMethod() {
    io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.StatsRequest, io.bloomserver.bloom.v1.StatsResponse> getStatsMethod;
    if ((getStatsMethod = BloomFilterServiceGrpc.getStatsMethod) == null) {
      synchronized (BloomFilterServiceGrpc.class) {
        if ((getStatsMethod = BloomFilterServiceGrpc.getStatsMethod) == null) {
          BloomFilterServiceGrpc.getStatsMethod = getStatsMethod =
              io.grpc.MethodDescriptor.<io.bloomserver.bloom.v1.StatsRequest, io.bloomserver.bloom.v1.StatsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Stats"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.StatsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.StatsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new BloomFilterServiceMethodDescriptorSupplier("Stats"))
              .build();
        }
      }
    }
    return getStatsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.DeleteRequest,
      io.bloomserver.bloom.v1.DeleteResponse> getDeleteMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Delete",
      requestType = io.bloomserver.bloom.v1.DeleteRequest.class,
      responseType = io.bloomserver.bloom.v1.DeleteResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.DeleteRequest,
      io.bloomserver.bloom.v1.DeleteResponse> getDeleteMethod() {
    io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.DeleteRequest, io.bloomserver.bloom.v1.DeleteResponse> getDeleteMethod;
    if ((getDeleteMethod = BloomFilterServiceGrpc.getDeleteMethod) == null) {
      synchronized (BloomFilterServiceGrpc.class) {
        if ((getDeleteMethod = BloomFilterServiceGrpc.getDeleteMethod) == null) {
          BloomFilterServiceGrpc.getDeleteMethod = getDeleteMethod =
              io.grpc.MethodDescriptor.<io.bloomserver.bloom.v1.DeleteRequest, io.bloomserver.bloom.v1.DeleteResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Delete"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.DeleteRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.DeleteResponse.getDefaultInstance()))
              .setSchemaDescriptor(new BloomFilterServiceMethodDescriptorSupplier("Delete"))
              .build();
        }
      }
    }
    return getDeleteMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.ListRequest,
      io.bloomserver.bloom.v1.ListResponse> getListMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "List",
      requestType = io.bloomserver.bloom.v1.ListRequest.class,
      responseType = io.bloomserver.bloom.v1.ListResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.ListRequest,
      io.bloomserver.bloom.v1.ListResponse> getListMethod() {
    io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.ListRequest, io.bloomserver.bloom.v1.ListResponse> getListMethod;
    if ((getListMethod = BloomFilterServiceGrpc.getListMethod) == null) {
      synchronized (BloomFilterServiceGrpc.class) {
        if ((getListMethod = BloomFilterServiceGrpc.getListMethod) == null) {
          BloomFilterServiceGrpc.getListMethod = getListMethod =
              io.grpc.MethodDescriptor.<io.bloomserver.bloom.v1.ListRequest, io.bloomserver.bloom.v1.ListResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "List"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.ListRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.ListResponse.getDefaultInstance()))
              .setSchemaDescriptor(new BloomFilterServiceMethodDescriptorSupplier("List"))
              .build();
        }
      }
    }
    return getListMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.ExportRequest,
      io.bloomserver.bloom.v1.ExportChunk> getExportMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Export",
      requestType = io.bloomserver.bloom.v1.ExportRequest.class,
      responseType = io.bloomserver.bloom.v1.ExportChunk.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.ExportRequest,
      io.bloomserver.bloom.v1.ExportChunk> getExportMethod() {
    io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.ExportRequest, io.bloomserver.bloom.v1.ExportChunk> getExportMethod;
    if ((getExportMethod = BloomFilterServiceGrpc.getExportMethod) == null) {
      synchronized (BloomFilterServiceGrpc.class) {
        if ((getExportMethod = BloomFilterServiceGrpc.getExportMethod) == null) {
          BloomFilterServiceGrpc.getExportMethod = getExportMethod =
              io.grpc.MethodDescriptor.<io.bloomserver.bloom.v1.ExportRequest, io.bloomserver.bloom.v1.ExportChunk>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Export"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.ExportRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.ExportChunk.getDefaultInstance()))
              .setSchemaDescriptor(new BloomFilterServiceMethodDescriptorSupplier("Export"))
              .build();
        }
      }
    }
    return getExportMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.ImportChunk,
      io.bloomserver.bloom.v1.ImportResponse> getImportMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Import",
      requestType = io.bloomserver.bloom.v1.ImportChunk.class,
      responseType = io.bloomserver.bloom.v1.ImportResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.CLIENT_STREAMING)
  public static io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.ImportChunk,
      io.bloomserver.bloom.v1.ImportResponse> getImportMethod() {
    io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.ImportChunk, io.bloomserver.bloom.v1.ImportResponse> getImportMethod;
    if ((getImportMethod = BloomFilterServiceGrpc.getImportMethod) == null) {
      synchronized (BloomFilterServiceGrpc.class) {
        if ((getImportMethod = BloomFilterServiceGrpc.getImportMethod) == null) {
          BloomFilterServiceGrpc.getImportMethod = getImportMethod =
              io.grpc.MethodDescriptor.<io.bloomserver.bloom.v1.ImportChunk, io.bloomserver.bloom.v1.ImportResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.CLIENT_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Import"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.ImportChunk.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.ImportResponse.getDefaultInstance()))
              .setSchemaDescriptor(new BloomFilterServiceMethodDescriptorSupplier("Import"))
              .build();
        }
      }
    }
    return getImportMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.MergeRequest,
      io.bloomserver.bloom.v1.MergeResponse> getMergeMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Merge",
      requestType = io.bloomserver.bloom.v1.MergeRequest.class,
      responseType = io.bloomserver.bloom.v1.MergeResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.MergeRequest,
      io.bloomserver.bloom.v1.MergeResponse> getMergeMethod() {
    io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.MergeRequest, io.bloomserver.bloom.v1.MergeResponse> getMergeMethod;
    if ((getMergeMethod = BloomFilterServiceGrpc.getMergeMethod) == null) {
      synchronized (BloomFilterServiceGrpc.class) {
        if ((getMergeMethod = BloomFilterServiceGrpc.getMergeMethod) == null) {
          BloomFilterServiceGrpc.getMergeMethod = getMergeMethod =
              io.grpc.MethodDescriptor.<io.bloomserver.bloom.v1.MergeRequest, io.bloomserver.bloom.v1.MergeResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Merge"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.MergeRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.MergeResponse.getDefaultInstance()))
              .setSchemaDescriptor(new BloomFilterServiceMethodDescriptorSupplier("Merge"))
              .build();
        }
      }
    }
    return getMergeMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.RemoveRequest,
      io.bloomserver.bloom.v1.RemoveResponse> getRemoveMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Remove",
      requestType = io.bloomserver.bloom.v1.RemoveRequest.class,
      responseType = io.bloomserver.bloom.v1.RemoveResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.RemoveRequest,
      io.bloomserver.bloom.v1.RemoveResponse> getRemoveMethod() {
    io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.RemoveRequest, io.bloomserver.bloom.v1.RemoveResponse> getRemoveMethod;
    if ((getRemoveMethod = BloomFilterServiceGrpc.getRemoveMethod) == null) {
      synchronized (BloomFilterServiceGrpc.class) {
        if ((getRemoveMethod = BloomFilterServiceGrpc.getRemoveMethod) == null) {
          BloomFilterServiceGrpc.getRemoveMethod = getRemoveMethod =
              io.grpc.MethodDescriptor.<io.bloomserver.bloom.v1.RemoveRequest, io.bloomserver.bloom.v1.RemoveResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Remove"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.RemoveRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.RemoveResponse.getDefaultInstance()))
              .setSchemaDescriptor(new BloomFilterServiceMethodDescriptorSupplier("Remove"))
              .build();
        }
      }
    }
    return getRemoveMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.CountRequest,
      io.bloomserver.bloom.v1.CountResponse> getCountMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Count",
      requestType = io.bloomserver.bloom.v1.CountRequest.class,
      responseType = io.bloomserver.bloom.v1.CountResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.CountRequest,
      io.bloomserver.bloom.v1.CountResponse> getCountMethod() {
    io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.CountRequest, io.bloomserver.bloom.v1.CountResponse> getCountMethod;
    if ((getCountMethod = BloomFilterServiceGrpc.getCountMethod) == null) {
      synchronized (BloomFilterServiceGrpc.class) {
        if ((getCountMethod = BloomFilterServiceGrpc.getCountMethod) == null) {
          BloomFilterServiceGrpc.getCountMethod = getCountMethod =
              io.grpc.MethodDescriptor.<io.bloomserver.bloom.v1.CountRequest, io.bloomserver.bloom.v1.CountResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Count"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.CountRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.CountResponse.getDefaultInstance()))
              .setSchemaDescriptor(new BloomFilterServiceMethodDescriptorSupplier("Count"))
              .build();
        }
      }
    }
    return getCountMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.PipelineRequest,
      io.bloomserver.bloom.v1.PipelineResponse> getPipelineMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Pipeline",
      requestType = io.bloomserver.bloom.v1.PipelineRequest.class,
      responseType = io.bloomserver.bloom.v1.PipelineResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
  public static io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.PipelineRequest,
      io.bloomserver.bloom.v1.PipelineResponse> getPipelineMethod() {
    io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.PipelineRequest, io.bloomserver.bloom.v1.PipelineResponse> getPipelineMethod;
    if ((getPipelineMethod = BloomFilterServiceGrpc.getPipelineMethod) == null) {
      synchronized (BloomFilterServiceGrpc.class) {
        if ((getPipelineMethod = BloomFilterServiceGrpc.getPipelineMethod) == null) {
          BloomFilterServiceGrpc.getPipelineMethod = getPipelineMethod =
              io.grpc.MethodDescriptor.<io.bloomserver.bloom.v1.PipelineRequest, io.bloomserver.bloom.v1.PipelineResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Pipeline"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.PipelineRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.PipelineResponse.getDefaultInstance()))
              .setSchemaDescriptor(new BloomFilterServiceMethodDescriptorSupplier("Pipeline"))
              .build();
        }
      }
    }
    return getPipelineMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.GetShardMapRequest,
      io.bloomserver.bloom.v1.GetShardMapResponse> getGetShardMapMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetShardMap",
      requestType = io.bloomserver.bloom.v1.GetShardMapRequest.class,
      responseType = io.bloomserver.bloom.v1.GetShardMapResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.GetShardMapRequest,
      io.bloomserver.bloom.v1.GetShardMapResponse> getGetShardMapMethod() {
    io.grpc.MethodDescriptor<io.bloomserver.bloom.v1.GetShardMapRequest, io.bloomserver.bloom.v1.GetShardMapResponse> getGetShardMapMethod;
    if ((getGetShardMapMethod = BloomFilterServiceGrpc.getGetShardMapMethod) == null) {
      synchronized (BloomFilterServiceGrpc.class) {
        if ((getGetShardMapMethod = BloomFilterServiceGrpc.getGetShardMapMethod) == null) {
          BloomFilterServiceGrpc.getGetShardMapMethod = getGetShardMapMethod =
              io.grpc.MethodDescriptor.<io.bloomserver.bloom.v1.GetShardMapRequest, io.bloomserver.bloom.v1.GetShardMapResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetShardMap"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.GetShardMapRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.bloomserver.bloom.v1.GetShardMapResponse.getDefaultInstance()))
              .setSchemaDescriptor(new BloomFilterServiceMethodDescriptorSupplier("GetShardMap"))
              .build();
        }
      }
    }
    return getGetShardMapMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static BloomFilterServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<BloomFilterServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<BloomFilterServiceStub>() {
        @java.lang.Override
        public BloomFilterServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new BloomFilterServiceStub(channel, callOptions);
        }
      };
    return BloomFilterServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static BloomFilterServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<BloomFilterServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<BloomFilterServiceBlockingStub>() {
        @java.lang.Override
        public BloomFilterServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new BloomFilterServiceBlockingStub(channel, callOptions);
        }
      };
    return BloomFilterServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static BloomFilterServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<BloomFilterServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<BloomFilterServiceFutureStub>() {
        @java.lang.Override
        public BloomFilterServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new BloomFilterServiceFutureStub(channel, callOptions);
        }
      };
    return BloomFilterServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * Named, persistent, scalable Bloom filters.
   * </pre>
   */
  public static abstract class BloomFilterServiceImplBase implements io.grpc.BindableService {

    /**
     * <pre>
     * Creates a filter. Reserving an existing name with an identical spec succeeds with
     * created=false, so every replica of a service may call it at start-up; with a different
     * spec it fails with ALREADY_EXISTS.
     * </pre>
     */
    public void reserve(io.bloomserver.bloom.v1.ReserveRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.ReserveResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getReserveMethod(), responseObserver);
    }

    /**
     * <pre>
     * Adds a batch of items atomically: when it returns OK every item is durable (it survives a
     * crash of the server), when it fails none was added. NOT_FOUND for a missing filter unless
     * create_if_missing is set. RESOURCE_EXHAUSTED when a non_scaling filter lacks room for the
     * batch's new items.
     * </pre>
     */
    public void add(io.bloomserver.bloom.v1.AddRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.AddResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getAddMethod(), responseObserver);
    }

    /**
     * <pre>
     * Checks a batch of items. present[i] false means item i was definitely never added.
     * </pre>
     */
    public void mightContain(io.bloomserver.bloom.v1.MightContainRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.MightContainResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getMightContainMethod(), responseObserver);
    }

    /**
     * <pre>
     * Describes a filter: spec, size, fill, counters, per-sub-filter detail.
     * </pre>
     */
    public void stats(io.bloomserver.bloom.v1.StatsRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.StatsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getStatsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Deletes a filter and its data. The name can be reserved again at once.
     * </pre>
     */
    public void delete(io.bloomserver.bloom.v1.DeleteRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.DeleteResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getDeleteMethod(), responseObserver);
    }

    /**
     * <pre>
     * Lists filters in name order, a page at a time.
     * </pre>
     */
    public void list(io.bloomserver.bloom.v1.ListRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.ListResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListMethod(), responseObserver);
    }

    /**
     * <pre>
     * Streams a self-describing, versioned, checksummed dump of a filter (spec, seed,
     * sub-filters, bits, counters) in chunks of at most 1 MiB.
     * ExportChunk is a frozen v1 name (buf's standard would say ExportResponse):
     * buf:lint:ignore RPC_RESPONSE_STANDARD_NAME
     * </pre>
     */
    public void export(io.bloomserver.bloom.v1.ExportRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.ExportChunk> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getExportMethod(), responseObserver);
    }

    /**
     * <pre>
     * Recreates a filter from an Export dump under a new name (given in the first chunk). The
     * result answers exactly like the exported filter. ALREADY_EXISTS if the name is taken
     * (unless the first chunk asks to merge_into_existing);
     * INVALID_ARGUMENT or DATA_LOSS for a corrupt or truncated dump, and then nothing is created.
     * ImportChunk is a frozen v1 name (buf's standard would say ImportRequest):
     * buf:lint:ignore RPC_REQUEST_STANDARD_NAME
     * </pre>
     */
    public io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.ImportChunk> import_(
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.ImportResponse> responseObserver) {
      return io.grpc.stub.ServerCalls.asyncUnimplementedStreamingCall(getImportMethod(), responseObserver);
    }

    /**
     * <pre>
     * ORs the bits of `sources` into `target`: afterwards the target answers "maybe" for every
     * item any source had (its union). The filters must be alike: one reserved with `like` the
     * other, or imported from one dump (same seed and spec). When it returns OK the union is
     * durable and, with replicas, on the followers that writes wait for; on disk it is all there
     * or not at all (for unions of up to 64 MiB of changed bits; a larger one is written in parts,
     * so a crash during the write may leave part of it: extra bits, nothing lost). Sub-filters merge one by one (the target grows to the longest source's chain),
     * so each holds what it held in every source: Stats of the union report its
     * estimated_cardinality and estimated_error_rate from its bits, and items_added as the sum of
     * the sources' (an upper bound). FAILED_PRECONDITION for filters not alike (the message names
     * the mismatch) or windowed; NOT_FOUND for a missing filter; INVALID_ARGUMENT for no sources,
     * more than 64, one named twice, or the target among them. A refused merge changes nothing.
     * </pre>
     */
    public void merge(io.bloomserver.bloom.v1.MergeRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.MergeResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getMergeMethod(), responseObserver);
    }

    /**
     * <pre>
     * CUCKOO filters only: removes one copy of each item, if the filter holds one; removed[i]
     * says whether it did. Durable and atomic like Add. Removing an item that was never added can
     * remove the fingerprint of another item that collides with it, which then reads absent:
     * remove only what you added. In a filter that has grown past its capacity (more than one
     * sub-filter), even removing an added item does so with a probability of about 2% of
     * error_rate: size capacity for the peak, or use non_scaling. Not idempotent, as a CUCKOO
     * filter's Add: a call retried after an error may remove a second copy. FAILED_PRECONDITION
     * on a BLOOM filter.
     * </pre>
     */
    public void remove(io.bloomserver.bloom.v1.RemoveRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.RemoveResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRemoveMethod(), responseObserver);
    }

    /**
     * <pre>
     * CUCKOO filters only: how many copies of each item the filter holds (adds not yet removed,
     * plus the rare other item whose fingerprint collides). FAILED_PRECONDITION on a BLOOM filter.
     * </pre>
     */
    public void count(io.bloomserver.bloom.v1.CountRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.CountResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCountMethod(), responseObserver);
    }

    /**
     * <pre>
     * Many Add/MightContain/Remove/Count operations over one long-lived stream, answered in request
     * order.
     * Each PipelineRequest gets exactly one PipelineResponse with the same id, in the order the
     * requests were sent. An operation means what the unary call means (an add's response: its
     * items are durable) and has the unary call's limits. A failing operation (NOT_FOUND, a bad
     * item, a full non_scaling filter, a read-only token on an add) is answered with `error`,
     * carrying the code and message the unary call would have returned, and the stream goes on.
     * The stream itself ends non-OK only for what concerns the whole stream: UNAUTHENTICATED (the
     * token is checked when the stream starts, before any message is read), INVALID_ARGUMENT for
     * a request with no operation, UNAVAILABLE when the server shuts down (after answering the
     * operations it had read), CANCELLED / DEADLINE_EXCEEDED. The server reads ahead a bounded
     * number of operations (--pipeline_window); a client that stops reading responses stops the
     * server reading its requests. Operations that arrive together are served together: adds to
     * one filter as one add, and the adds of a whole read, whatever their filters, in one journal
     * write (one fsync with --sync). A PipelineRequest may carry further operations in `more`.
     * </pre>
     */
    public io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.PipelineRequest> pipeline(
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.PipelineResponse> responseObserver) {
      return io.grpc.stub.ServerCalls.asyncUnimplementedStreamingCall(getPipelineMethod(), responseObserver);
    }

    /**
     * <pre>
     * Which group of a sharded deployment owns which filters, and where each group is reached,
     * as this pod knows it now: clients fetch it to send each call straight to the group that
     * owns its filter. Any pod answers any call (one that does not own the filter forwards it
     * there), so a client that never fetches the map works too, at the cost of that hop. A
     * forwarded call's answer carries the header `bloom-shard-map-version` (this map's version):
     * a client whose map is older fetches it again. An unsharded server answers a map of
     * version 0 with no slots: send every call to it.
     * </pre>
     */
    public void getShardMap(io.bloomserver.bloom.v1.GetShardMapRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.GetShardMapResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetShardMapMethod(), responseObserver);
    }

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
          .addMethod(
            getReserveMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                io.bloomserver.bloom.v1.ReserveRequest,
                io.bloomserver.bloom.v1.ReserveResponse>(
                  this, METHODID_RESERVE)))
          .addMethod(
            getAddMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                io.bloomserver.bloom.v1.AddRequest,
                io.bloomserver.bloom.v1.AddResponse>(
                  this, METHODID_ADD)))
          .addMethod(
            getMightContainMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                io.bloomserver.bloom.v1.MightContainRequest,
                io.bloomserver.bloom.v1.MightContainResponse>(
                  this, METHODID_MIGHT_CONTAIN)))
          .addMethod(
            getStatsMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                io.bloomserver.bloom.v1.StatsRequest,
                io.bloomserver.bloom.v1.StatsResponse>(
                  this, METHODID_STATS)))
          .addMethod(
            getDeleteMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                io.bloomserver.bloom.v1.DeleteRequest,
                io.bloomserver.bloom.v1.DeleteResponse>(
                  this, METHODID_DELETE)))
          .addMethod(
            getListMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                io.bloomserver.bloom.v1.ListRequest,
                io.bloomserver.bloom.v1.ListResponse>(
                  this, METHODID_LIST)))
          .addMethod(
            getExportMethod(),
            io.grpc.stub.ServerCalls.asyncServerStreamingCall(
              new MethodHandlers<
                io.bloomserver.bloom.v1.ExportRequest,
                io.bloomserver.bloom.v1.ExportChunk>(
                  this, METHODID_EXPORT)))
          .addMethod(
            getImportMethod(),
            io.grpc.stub.ServerCalls.asyncClientStreamingCall(
              new MethodHandlers<
                io.bloomserver.bloom.v1.ImportChunk,
                io.bloomserver.bloom.v1.ImportResponse>(
                  this, METHODID_IMPORT)))
          .addMethod(
            getMergeMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                io.bloomserver.bloom.v1.MergeRequest,
                io.bloomserver.bloom.v1.MergeResponse>(
                  this, METHODID_MERGE)))
          .addMethod(
            getRemoveMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                io.bloomserver.bloom.v1.RemoveRequest,
                io.bloomserver.bloom.v1.RemoveResponse>(
                  this, METHODID_REMOVE)))
          .addMethod(
            getCountMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                io.bloomserver.bloom.v1.CountRequest,
                io.bloomserver.bloom.v1.CountResponse>(
                  this, METHODID_COUNT)))
          .addMethod(
            getPipelineMethod(),
            io.grpc.stub.ServerCalls.asyncBidiStreamingCall(
              new MethodHandlers<
                io.bloomserver.bloom.v1.PipelineRequest,
                io.bloomserver.bloom.v1.PipelineResponse>(
                  this, METHODID_PIPELINE)))
          .addMethod(
            getGetShardMapMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                io.bloomserver.bloom.v1.GetShardMapRequest,
                io.bloomserver.bloom.v1.GetShardMapResponse>(
                  this, METHODID_GET_SHARD_MAP)))
          .build();
    }
  }

  /**
   * <pre>
   * Named, persistent, scalable Bloom filters.
   * </pre>
   */
  public static final class BloomFilterServiceStub extends io.grpc.stub.AbstractAsyncStub<BloomFilterServiceStub> {
    private BloomFilterServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected BloomFilterServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new BloomFilterServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a filter. Reserving an existing name with an identical spec succeeds with
     * created=false, so every replica of a service may call it at start-up; with a different
     * spec it fails with ALREADY_EXISTS.
     * </pre>
     */
    public void reserve(io.bloomserver.bloom.v1.ReserveRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.ReserveResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getReserveMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Adds a batch of items atomically: when it returns OK every item is durable (it survives a
     * crash of the server), when it fails none was added. NOT_FOUND for a missing filter unless
     * create_if_missing is set. RESOURCE_EXHAUSTED when a non_scaling filter lacks room for the
     * batch's new items.
     * </pre>
     */
    public void add(io.bloomserver.bloom.v1.AddRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.AddResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getAddMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Checks a batch of items. present[i] false means item i was definitely never added.
     * </pre>
     */
    public void mightContain(io.bloomserver.bloom.v1.MightContainRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.MightContainResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getMightContainMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Describes a filter: spec, size, fill, counters, per-sub-filter detail.
     * </pre>
     */
    public void stats(io.bloomserver.bloom.v1.StatsRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.StatsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getStatsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Deletes a filter and its data. The name can be reserved again at once.
     * </pre>
     */
    public void delete(io.bloomserver.bloom.v1.DeleteRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.DeleteResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getDeleteMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Lists filters in name order, a page at a time.
     * </pre>
     */
    public void list(io.bloomserver.bloom.v1.ListRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.ListResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Streams a self-describing, versioned, checksummed dump of a filter (spec, seed,
     * sub-filters, bits, counters) in chunks of at most 1 MiB.
     * ExportChunk is a frozen v1 name (buf's standard would say ExportResponse):
     * buf:lint:ignore RPC_RESPONSE_STANDARD_NAME
     * </pre>
     */
    public void export(io.bloomserver.bloom.v1.ExportRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.ExportChunk> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getExportMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Recreates a filter from an Export dump under a new name (given in the first chunk). The
     * result answers exactly like the exported filter. ALREADY_EXISTS if the name is taken
     * (unless the first chunk asks to merge_into_existing);
     * INVALID_ARGUMENT or DATA_LOSS for a corrupt or truncated dump, and then nothing is created.
     * ImportChunk is a frozen v1 name (buf's standard would say ImportRequest):
     * buf:lint:ignore RPC_REQUEST_STANDARD_NAME
     * </pre>
     */
    public io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.ImportChunk> import_(
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.ImportResponse> responseObserver) {
      return io.grpc.stub.ClientCalls.asyncClientStreamingCall(
          getChannel().newCall(getImportMethod(), getCallOptions()), responseObserver);
    }

    /**
     * <pre>
     * ORs the bits of `sources` into `target`: afterwards the target answers "maybe" for every
     * item any source had (its union). The filters must be alike: one reserved with `like` the
     * other, or imported from one dump (same seed and spec). When it returns OK the union is
     * durable and, with replicas, on the followers that writes wait for; on disk it is all there
     * or not at all (for unions of up to 64 MiB of changed bits; a larger one is written in parts,
     * so a crash during the write may leave part of it: extra bits, nothing lost). Sub-filters merge one by one (the target grows to the longest source's chain),
     * so each holds what it held in every source: Stats of the union report its
     * estimated_cardinality and estimated_error_rate from its bits, and items_added as the sum of
     * the sources' (an upper bound). FAILED_PRECONDITION for filters not alike (the message names
     * the mismatch) or windowed; NOT_FOUND for a missing filter; INVALID_ARGUMENT for no sources,
     * more than 64, one named twice, or the target among them. A refused merge changes nothing.
     * </pre>
     */
    public void merge(io.bloomserver.bloom.v1.MergeRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.MergeResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getMergeMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * CUCKOO filters only: removes one copy of each item, if the filter holds one; removed[i]
     * says whether it did. Durable and atomic like Add. Removing an item that was never added can
     * remove the fingerprint of another item that collides with it, which then reads absent:
     * remove only what you added. In a filter that has grown past its capacity (more than one
     * sub-filter), even removing an added item does so with a probability of about 2% of
     * error_rate: size capacity for the peak, or use non_scaling. Not idempotent, as a CUCKOO
     * filter's Add: a call retried after an error may remove a second copy. FAILED_PRECONDITION
     * on a BLOOM filter.
     * </pre>
     */
    public void remove(io.bloomserver.bloom.v1.RemoveRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.RemoveResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRemoveMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * CUCKOO filters only: how many copies of each item the filter holds (adds not yet removed,
     * plus the rare other item whose fingerprint collides). FAILED_PRECONDITION on a BLOOM filter.
     * </pre>
     */
    public void count(io.bloomserver.bloom.v1.CountRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.CountResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCountMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Many Add/MightContain/Remove/Count operations over one long-lived stream, answered in request
     * order.
     * Each PipelineRequest gets exactly one PipelineResponse with the same id, in the order the
     * requests were sent. An operation means what the unary call means (an add's response: its
     * items are durable) and has the unary call's limits. A failing operation (NOT_FOUND, a bad
     * item, a full non_scaling filter, a read-only token on an add) is answered with `error`,
     * carrying the code and message the unary call would have returned, and the stream goes on.
     * The stream itself ends non-OK only for what concerns the whole stream: UNAUTHENTICATED (the
     * token is checked when the stream starts, before any message is read), INVALID_ARGUMENT for
     * a request with no operation, UNAVAILABLE when the server shuts down (after answering the
     * operations it had read), CANCELLED / DEADLINE_EXCEEDED. The server reads ahead a bounded
     * number of operations (--pipeline_window); a client that stops reading responses stops the
     * server reading its requests. Operations that arrive together are served together: adds to
     * one filter as one add, and the adds of a whole read, whatever their filters, in one journal
     * write (one fsync with --sync). A PipelineRequest may carry further operations in `more`.
     * </pre>
     */
    public io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.PipelineRequest> pipeline(
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.PipelineResponse> responseObserver) {
      return io.grpc.stub.ClientCalls.asyncBidiStreamingCall(
          getChannel().newCall(getPipelineMethod(), getCallOptions()), responseObserver);
    }

    /**
     * <pre>
     * Which group of a sharded deployment owns which filters, and where each group is reached,
     * as this pod knows it now: clients fetch it to send each call straight to the group that
     * owns its filter. Any pod answers any call (one that does not own the filter forwards it
     * there), so a client that never fetches the map works too, at the cost of that hop. A
     * forwarded call's answer carries the header `bloom-shard-map-version` (this map's version):
     * a client whose map is older fetches it again. An unsharded server answers a map of
     * version 0 with no slots: send every call to it.
     * </pre>
     */
    public void getShardMap(io.bloomserver.bloom.v1.GetShardMapRequest request,
        io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.GetShardMapResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetShardMapMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * <pre>
   * Named, persistent, scalable Bloom filters.
   * </pre>
   */
  public static final class BloomFilterServiceBlockingStub extends io.grpc.stub.AbstractBlockingStub<BloomFilterServiceBlockingStub> {
    private BloomFilterServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected BloomFilterServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new BloomFilterServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a filter. Reserving an existing name with an identical spec succeeds with
     * created=false, so every replica of a service may call it at start-up; with a different
     * spec it fails with ALREADY_EXISTS.
     * </pre>
     */
    public io.bloomserver.bloom.v1.ReserveResponse reserve(io.bloomserver.bloom.v1.ReserveRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getReserveMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Adds a batch of items atomically: when it returns OK every item is durable (it survives a
     * crash of the server), when it fails none was added. NOT_FOUND for a missing filter unless
     * create_if_missing is set. RESOURCE_EXHAUSTED when a non_scaling filter lacks room for the
     * batch's new items.
     * </pre>
     */
    public io.bloomserver.bloom.v1.AddResponse add(io.bloomserver.bloom.v1.AddRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getAddMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Checks a batch of items. present[i] false means item i was definitely never added.
     * </pre>
     */
    public io.bloomserver.bloom.v1.MightContainResponse mightContain(io.bloomserver.bloom.v1.MightContainRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getMightContainMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Describes a filter: spec, size, fill, counters, per-sub-filter detail.
     * </pre>
     */
    public io.bloomserver.bloom.v1.StatsResponse stats(io.bloomserver.bloom.v1.StatsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getStatsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes a filter and its data. The name can be reserved again at once.
     * </pre>
     */
    public io.bloomserver.bloom.v1.DeleteResponse delete(io.bloomserver.bloom.v1.DeleteRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getDeleteMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists filters in name order, a page at a time.
     * </pre>
     */
    public io.bloomserver.bloom.v1.ListResponse list(io.bloomserver.bloom.v1.ListRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Streams a self-describing, versioned, checksummed dump of a filter (spec, seed,
     * sub-filters, bits, counters) in chunks of at most 1 MiB.
     * ExportChunk is a frozen v1 name (buf's standard would say ExportResponse):
     * buf:lint:ignore RPC_RESPONSE_STANDARD_NAME
     * </pre>
     */
    public java.util.Iterator<io.bloomserver.bloom.v1.ExportChunk> export(
        io.bloomserver.bloom.v1.ExportRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getExportMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * ORs the bits of `sources` into `target`: afterwards the target answers "maybe" for every
     * item any source had (its union). The filters must be alike: one reserved with `like` the
     * other, or imported from one dump (same seed and spec). When it returns OK the union is
     * durable and, with replicas, on the followers that writes wait for; on disk it is all there
     * or not at all (for unions of up to 64 MiB of changed bits; a larger one is written in parts,
     * so a crash during the write may leave part of it: extra bits, nothing lost). Sub-filters merge one by one (the target grows to the longest source's chain),
     * so each holds what it held in every source: Stats of the union report its
     * estimated_cardinality and estimated_error_rate from its bits, and items_added as the sum of
     * the sources' (an upper bound). FAILED_PRECONDITION for filters not alike (the message names
     * the mismatch) or windowed; NOT_FOUND for a missing filter; INVALID_ARGUMENT for no sources,
     * more than 64, one named twice, or the target among them. A refused merge changes nothing.
     * </pre>
     */
    public io.bloomserver.bloom.v1.MergeResponse merge(io.bloomserver.bloom.v1.MergeRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getMergeMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * CUCKOO filters only: removes one copy of each item, if the filter holds one; removed[i]
     * says whether it did. Durable and atomic like Add. Removing an item that was never added can
     * remove the fingerprint of another item that collides with it, which then reads absent:
     * remove only what you added. In a filter that has grown past its capacity (more than one
     * sub-filter), even removing an added item does so with a probability of about 2% of
     * error_rate: size capacity for the peak, or use non_scaling. Not idempotent, as a CUCKOO
     * filter's Add: a call retried after an error may remove a second copy. FAILED_PRECONDITION
     * on a BLOOM filter.
     * </pre>
     */
    public io.bloomserver.bloom.v1.RemoveResponse remove(io.bloomserver.bloom.v1.RemoveRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRemoveMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * CUCKOO filters only: how many copies of each item the filter holds (adds not yet removed,
     * plus the rare other item whose fingerprint collides). FAILED_PRECONDITION on a BLOOM filter.
     * </pre>
     */
    public io.bloomserver.bloom.v1.CountResponse count(io.bloomserver.bloom.v1.CountRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCountMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Which group of a sharded deployment owns which filters, and where each group is reached,
     * as this pod knows it now: clients fetch it to send each call straight to the group that
     * owns its filter. Any pod answers any call (one that does not own the filter forwards it
     * there), so a client that never fetches the map works too, at the cost of that hop. A
     * forwarded call's answer carries the header `bloom-shard-map-version` (this map's version):
     * a client whose map is older fetches it again. An unsharded server answers a map of
     * version 0 with no slots: send every call to it.
     * </pre>
     */
    public io.bloomserver.bloom.v1.GetShardMapResponse getShardMap(io.bloomserver.bloom.v1.GetShardMapRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetShardMapMethod(), getCallOptions(), request);
    }
  }

  /**
   * <pre>
   * Named, persistent, scalable Bloom filters.
   * </pre>
   */
  public static final class BloomFilterServiceFutureStub extends io.grpc.stub.AbstractFutureStub<BloomFilterServiceFutureStub> {
    private BloomFilterServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected BloomFilterServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new BloomFilterServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a filter. Reserving an existing name with an identical spec succeeds with
     * created=false, so every replica of a service may call it at start-up; with a different
     * spec it fails with ALREADY_EXISTS.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.bloomserver.bloom.v1.ReserveResponse> reserve(
        io.bloomserver.bloom.v1.ReserveRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getReserveMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Adds a batch of items atomically: when it returns OK every item is durable (it survives a
     * crash of the server), when it fails none was added. NOT_FOUND for a missing filter unless
     * create_if_missing is set. RESOURCE_EXHAUSTED when a non_scaling filter lacks room for the
     * batch's new items.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.bloomserver.bloom.v1.AddResponse> add(
        io.bloomserver.bloom.v1.AddRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getAddMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Checks a batch of items. present[i] false means item i was definitely never added.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.bloomserver.bloom.v1.MightContainResponse> mightContain(
        io.bloomserver.bloom.v1.MightContainRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getMightContainMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Describes a filter: spec, size, fill, counters, per-sub-filter detail.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.bloomserver.bloom.v1.StatsResponse> stats(
        io.bloomserver.bloom.v1.StatsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getStatsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Deletes a filter and its data. The name can be reserved again at once.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.bloomserver.bloom.v1.DeleteResponse> delete(
        io.bloomserver.bloom.v1.DeleteRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getDeleteMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Lists filters in name order, a page at a time.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.bloomserver.bloom.v1.ListResponse> list(
        io.bloomserver.bloom.v1.ListRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * ORs the bits of `sources` into `target`: afterwards the target answers "maybe" for every
     * item any source had (its union). The filters must be alike: one reserved with `like` the
     * other, or imported from one dump (same seed and spec). When it returns OK the union is
     * durable and, with replicas, on the followers that writes wait for; on disk it is all there
     * or not at all (for unions of up to 64 MiB of changed bits; a larger one is written in parts,
     * so a crash during the write may leave part of it: extra bits, nothing lost). Sub-filters merge one by one (the target grows to the longest source's chain),
     * so each holds what it held in every source: Stats of the union report its
     * estimated_cardinality and estimated_error_rate from its bits, and items_added as the sum of
     * the sources' (an upper bound). FAILED_PRECONDITION for filters not alike (the message names
     * the mismatch) or windowed; NOT_FOUND for a missing filter; INVALID_ARGUMENT for no sources,
     * more than 64, one named twice, or the target among them. A refused merge changes nothing.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.bloomserver.bloom.v1.MergeResponse> merge(
        io.bloomserver.bloom.v1.MergeRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getMergeMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * CUCKOO filters only: removes one copy of each item, if the filter holds one; removed[i]
     * says whether it did. Durable and atomic like Add. Removing an item that was never added can
     * remove the fingerprint of another item that collides with it, which then reads absent:
     * remove only what you added. In a filter that has grown past its capacity (more than one
     * sub-filter), even removing an added item does so with a probability of about 2% of
     * error_rate: size capacity for the peak, or use non_scaling. Not idempotent, as a CUCKOO
     * filter's Add: a call retried after an error may remove a second copy. FAILED_PRECONDITION
     * on a BLOOM filter.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.bloomserver.bloom.v1.RemoveResponse> remove(
        io.bloomserver.bloom.v1.RemoveRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRemoveMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * CUCKOO filters only: how many copies of each item the filter holds (adds not yet removed,
     * plus the rare other item whose fingerprint collides). FAILED_PRECONDITION on a BLOOM filter.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.bloomserver.bloom.v1.CountResponse> count(
        io.bloomserver.bloom.v1.CountRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCountMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Which group of a sharded deployment owns which filters, and where each group is reached,
     * as this pod knows it now: clients fetch it to send each call straight to the group that
     * owns its filter. Any pod answers any call (one that does not own the filter forwards it
     * there), so a client that never fetches the map works too, at the cost of that hop. A
     * forwarded call's answer carries the header `bloom-shard-map-version` (this map's version):
     * a client whose map is older fetches it again. An unsharded server answers a map of
     * version 0 with no slots: send every call to it.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.bloomserver.bloom.v1.GetShardMapResponse> getShardMap(
        io.bloomserver.bloom.v1.GetShardMapRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetShardMapMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_RESERVE = 0;
  private static final int METHODID_ADD = 1;
  private static final int METHODID_MIGHT_CONTAIN = 2;
  private static final int METHODID_STATS = 3;
  private static final int METHODID_DELETE = 4;
  private static final int METHODID_LIST = 5;
  private static final int METHODID_EXPORT = 6;
  private static final int METHODID_MERGE = 7;
  private static final int METHODID_REMOVE = 8;
  private static final int METHODID_COUNT = 9;
  private static final int METHODID_GET_SHARD_MAP = 10;
  private static final int METHODID_IMPORT = 11;
  private static final int METHODID_PIPELINE = 12;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final BloomFilterServiceImplBase serviceImpl;
    private final int methodId;

    MethodHandlers(BloomFilterServiceImplBase serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_RESERVE:
          serviceImpl.reserve((io.bloomserver.bloom.v1.ReserveRequest) request,
              (io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.ReserveResponse>) responseObserver);
          break;
        case METHODID_ADD:
          serviceImpl.add((io.bloomserver.bloom.v1.AddRequest) request,
              (io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.AddResponse>) responseObserver);
          break;
        case METHODID_MIGHT_CONTAIN:
          serviceImpl.mightContain((io.bloomserver.bloom.v1.MightContainRequest) request,
              (io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.MightContainResponse>) responseObserver);
          break;
        case METHODID_STATS:
          serviceImpl.stats((io.bloomserver.bloom.v1.StatsRequest) request,
              (io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.StatsResponse>) responseObserver);
          break;
        case METHODID_DELETE:
          serviceImpl.delete((io.bloomserver.bloom.v1.DeleteRequest) request,
              (io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.DeleteResponse>) responseObserver);
          break;
        case METHODID_LIST:
          serviceImpl.list((io.bloomserver.bloom.v1.ListRequest) request,
              (io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.ListResponse>) responseObserver);
          break;
        case METHODID_EXPORT:
          serviceImpl.export((io.bloomserver.bloom.v1.ExportRequest) request,
              (io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.ExportChunk>) responseObserver);
          break;
        case METHODID_MERGE:
          serviceImpl.merge((io.bloomserver.bloom.v1.MergeRequest) request,
              (io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.MergeResponse>) responseObserver);
          break;
        case METHODID_REMOVE:
          serviceImpl.remove((io.bloomserver.bloom.v1.RemoveRequest) request,
              (io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.RemoveResponse>) responseObserver);
          break;
        case METHODID_COUNT:
          serviceImpl.count((io.bloomserver.bloom.v1.CountRequest) request,
              (io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.CountResponse>) responseObserver);
          break;
        case METHODID_GET_SHARD_MAP:
          serviceImpl.getShardMap((io.bloomserver.bloom.v1.GetShardMapRequest) request,
              (io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.GetShardMapResponse>) responseObserver);
          break;
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_IMPORT:
          return (io.grpc.stub.StreamObserver<Req>) serviceImpl.import_(
              (io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.ImportResponse>) responseObserver);
        case METHODID_PIPELINE:
          return (io.grpc.stub.StreamObserver<Req>) serviceImpl.pipeline(
              (io.grpc.stub.StreamObserver<io.bloomserver.bloom.v1.PipelineResponse>) responseObserver);
        default:
          throw new AssertionError();
      }
    }
  }

  private static abstract class BloomFilterServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    BloomFilterServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return io.bloomserver.bloom.v1.BloomProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("BloomFilterService");
    }
  }

  private static final class BloomFilterServiceFileDescriptorSupplier
      extends BloomFilterServiceBaseDescriptorSupplier {
    BloomFilterServiceFileDescriptorSupplier() {}
  }

  private static final class BloomFilterServiceMethodDescriptorSupplier
      extends BloomFilterServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final String methodName;

    BloomFilterServiceMethodDescriptorSupplier(String methodName) {
      this.methodName = methodName;
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.MethodDescriptor getMethodDescriptor() {
      return getServiceDescriptor().findMethodByName(methodName);
    }
  }

  private static volatile io.grpc.ServiceDescriptor serviceDescriptor;

  public static io.grpc.ServiceDescriptor getServiceDescriptor() {
    io.grpc.ServiceDescriptor result = serviceDescriptor;
    if (result == null) {
      synchronized (BloomFilterServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new BloomFilterServiceFileDescriptorSupplier())
              .addMethod(getReserveMethod())
              .addMethod(getAddMethod())
              .addMethod(getMightContainMethod())
              .addMethod(getStatsMethod())
              .addMethod(getDeleteMethod())
              .addMethod(getListMethod())
              .addMethod(getExportMethod())
              .addMethod(getImportMethod())
              .addMethod(getMergeMethod())
              .addMethod(getRemoveMethod())
              .addMethod(getCountMethod())
              .addMethod(getPipelineMethod())
              .addMethod(getGetShardMapMethod())
              .build();
        }
      }
    }
    return result;
  }
}
