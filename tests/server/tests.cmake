# tests/server: test_server runs the real df11d (DF11D_PATH); the Python client check runs here.
if(TARGET test_server AND TARGET df11d)
  target_compile_definitions(test_server PRIVATE DF11D_PATH="$<TARGET_FILE:df11d>")
  add_dependencies(test_server df11d)
  find_program(DF11_PROTOC_FOR_PYTHON protoc)
  find_package(Python3 COMPONENTS Interpreter)
  if(DF11_PROTOC_FOR_PYTHON AND Python3_Interpreter_FOUND)
    add_test(NAME server_python_client
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/python_client_test.py
                     --df11d $<TARGET_FILE:df11d> --df11 $<TARGET_FILE:df11> --protoc ${DF11_PROTOC_FOR_PYTHON}
                     --proto-root ${PROJECT_SOURCE_DIR} --tokenizer ${DF11_TEST_FIXTURES}/tiny-tokenizer)
    set_tests_properties(server_python_client PROPERTIES TIMEOUT 120)
  endif()
endif()
