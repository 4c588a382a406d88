# tests/server: test_server runs the real df11d (DF11D_PATH); the Python client check runs here.
if(TARGET test_server AND TARGET df11d)
  target_compile_definitions(test_server PRIVATE DF11D_PATH="$<TARGET_FILE:df11d>")
  add_dependencies(test_server df11d)
  find_program(DF11_PROTOC_FOR_PYTHON protoc)
  # Debian's interpreter: python3-grpcio and python3-protobuf live in its dist-packages.
  find_program(DF11_SYSTEM_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(DF11_PROTOC_FOR_PYTHON AND DF11_SYSTEM_PYTHON3)
    add_test(NAME server_python_client
             COMMAND ${DF11_SYSTEM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/python_client_test.py
                     --df11d $<TARGET_FILE:df11d> --df11 $<TARGET_FILE:df11> --protoc ${DF11_PROTOC_FOR_PYTHON}
                     --proto-root ${PROJECT_SOURCE_DIR} --tokenizer ${DF11_TEST_FIXTURES}/tiny-tokenizer)
    set_tests_properties(server_python_client PROPERTIES TIMEOUT 120)
  endif()
  # The OpenAI HTTP API with the official Node SDK on the demo model (DF11_OPENAI_SDK_DIR from
  # scripts/fetch-test-openai-sdk.sh; node from scripts/setup.sh).
  find_program(DF11_NODE node)
  if(DF11_NODE)
    add_test(NAME server_openai_sdk
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/openai_sdk_test.sh $<TARGET_FILE:df11d> $<TARGET_FILE:df11>
                     ${PROJECT_SOURCE_DIR}/deploy/demo-model)
    set_tests_properties(server_openai_sdk PROPERTIES TIMEOUT 180)
  endif()
endif()

# Fuzz targets of the daemon's parsers (tests/fuzz/server_*_fuzz.cc) need df11_server_parsers
# (server/CMakeLists.txt); they are defined after this file is included, so link them at the end
# of the directory.
if(DF11_FUZZ AND TARGET df11_server_parsers)
  function(df11_link_server_fuzz_targets)
    foreach(target fuzz_server_config fuzz_server_request fuzz_server_openai)
      if(TARGET ${target})
        target_link_libraries(${target} PRIVATE df11_server_parsers)
      endif()
    endforeach()
  endfunction()
  cmake_language(DEFER CALL df11_link_server_fuzz_targets)
endif()
